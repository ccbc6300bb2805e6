# zsh_complete.zsh COMPLETIONS_DIR BIN_DIR WORDS - type WORDS and a Tab in an
# interactive zsh (on a pseudo-terminal, compinit loaded from
# COMPLETIONS_DIR, gpufilter from BIN_DIR), then print the line as the
# completion left it: "LINE: ...".
zmodload zsh/zpty
zpty z 'zsh -f -i'
zpty -w z "PS1='> '; fpath=($1 \$fpath); autoload -Uz compinit; compinit -u -D; path=($2 \$path)"
# the pauses let the completion (which runs gpufilter --list-masks) end
# before more keys arrive, with room for a sanitized build beside a
# parallel test run
zpty -w -n z "$3"$'\t'
sleep 3
zpty -w -n z $'\x01echo LINE:\x05\n'
sleep 1
out=''
while zpty -rt z line; do out+=$line; done
print -r -- $out | tr -d '\r' | grep -a '^LINE:' | tail -1
zpty -d z
