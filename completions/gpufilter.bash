# bash completion for gpufilter: options, mask names (from --list-masks),
# border modes and the other fixed values; files elsewhere.
_gpufilter_masks()
{
    "${COMP_WORDS[0]}" --list-masks 2>/dev/null | awk '!/^#/ { print $1 }'
}

_gpufilter()
{
    local cur prev
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    case $prev in
        -m|--mask)
            COMPREPLY=($(compgen -W "$(_gpufilter_masks)" -- "$cur") $(compgen -f -X '!*.mask' -- "$cur"))
            return ;;
        -b|--border) COMPREPLY=($(compgen -W "nearest constant reflect mirror wrap" -- "$cur")); return ;;
        -f|--format) COMPREPLY=($(compgen -W "png jpg jpeg bmp tga" -- "$cur")); return ;;
        --backend) COMPREPLY=($(compgen -W "auto cuda cpu reference" -- "$cur")); return ;;
        --kernel) COMPREPLY=($(compgen -W "auto direct separable blocked tiled naive" -- "$cur")); return ;;
        --fft) COMPREPLY=($(compgen -W "auto always never" -- "$cur")); return ;;
        --depth) COMPREPLY=($(compgen -W "8 16" -- "$cur")); return ;;
        --tile) COMPREPLY=($(compgen -W "auto sweep 16x16 32x8 32x16 64x8 128x8 512x8" -- "$cur")); return ;;
        -o|--output-dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
        -q|--quality|-j|--jobs|--png-level|--device|--devices|--shard|--suffix|--max-pixels|--max-memory|--gpu-memory|--decode-timeout)
            return ;;
    esac
    case $cur in
        --stats=*|--equalize=*|--diffuse=*)
            local values="table json"
            [[ $cur == --equalize=* ]] && values="luminance channels"
            [[ $cur == --diffuse=* ]] && values="heat pm-exp pm-rational"
            COMPREPLY=($(compgen -P "${cur%%=*}=" -W "$values" -- "${cur#*=}"))
            return ;;
        -*)
            COMPREPLY=($(compgen -W "-m --mask -b --border --filter-alpha --no-autorotate -f --format
                -q --quality --png-level --backend --device --devices --tile --kernel --fft --gpu-memory --output
                --force -o --output-dir --files-from --suffix -j --jobs --shard --quiet
                --max-pixels --max-memory --decode-timeout --equalize --clahe --normalize --auto-level --diffuse
                --stats --summary --gray --depth --verify --csv -v --verbose --list-masks --list-devices --list-paths -h --help -V --version" -- "$cur"))
            return ;;
    esac
    COMPREPLY=($(compgen -f -- "$cur"))
}
complete -o filenames -F _gpufilter gpufilter
