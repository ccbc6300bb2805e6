#!/bin/sh
# embed.sh MASK... - print the C table of builtin_masks.h: each mask
# file's name and text, as string literals.
set -eu
echo '/* generated from the mask files by masks/embed.sh */'
echo '#include "builtin_masks.h"'
echo 'const gf_builtin_mask gf_builtin_masks[] = {'
for f in "$@"; do
    name=$(basename "$f" .mask)
    printf '    {"%s",\n' "$name"
    sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/     "/' -e 's/$/\\n"/' "$f"
    echo '    },'
done
echo '};'
echo "const int gf_builtin_mask_count = $#;"
