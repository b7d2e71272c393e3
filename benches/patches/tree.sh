#!/usr/bin/env bash
# A measurement variant's source tree:
#
#   benches/patches/tree.sh NAME
#
# copies the working tree (without target/ and .git) to
# target/ab-NAME/tree, replacing an earlier copy, applies
# benches/patches/NAME.patch there (`patch -p1`, no fuzz: a hunk whose
# context has changed fails rather than land elsewhere), and prints the
# copy's absolute path. Exits non-zero, with patch's output on stderr, if
# the patch does not apply. Used by benches/ab.sh and
# benches/patches/check.sh; each builds the copy with its own target
# directory (target/ab-NAME/target).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

if (($# != 1)); then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
name=$1
patch_file=$root/benches/patches/$name.patch
if ! [[ $name =~ ^[a-z0-9][a-z0-9-]*$ && -f $patch_file ]]; then
  echo "tree.sh: no patch benches/patches/$name.patch (have: $(cd benches/patches && ls -- *.patch | sed 's/\.patch$//' | tr '\n' ' '))" >&2
  exit 2
fi

tree=$root/target/ab-$name/tree
rm -rf "$tree"
mkdir -p "$tree"
tar -C "$root" --exclude=./target --exclude=./.git -cf - . | tar -C "$tree" -xf -
if ! patch -d "$tree" -p1 --batch --forward --fuzz=0 --no-backup-if-mismatch \
  <"$patch_file" >"$tree.patch.log" 2>&1; then
  sed 's/^/tree.sh: /' "$tree.patch.log" >&2
  echo "tree.sh: benches/patches/$name.patch does not apply to the current tree (see above)" >&2
  exit 1
fi
echo "$tree"
