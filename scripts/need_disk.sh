#!/bin/sh
# Refuse, in one line and before anything is written, an install that the disk cannot hold:
# a pip install that runs out of space halfway leaves a broken environment and an OSError
# in a page of pip's output. Usage: need_disk.sh GiB DIR WHAT
# DIR may not exist yet: its nearest existing parent says which file system it lands on.
# What DIR already holds counts as installed: a reinstall into a full environment needs
# only what is missing.
set -eu
need_gib=$1 dir=$2 what=$3
probe=$dir
while [ ! -e "$probe" ]; do probe=$(dirname "$probe"); done
held_kib=0
[ -d "$dir" ] && held_kib=$(du -sk "$dir" | cut -f1)
free_kib=$(df -Pk "$probe" | awk -v held="$held_kib" 'NR == 2 { print $4 + held }')
free_gib=$(awk -v k="$free_kib" 'BEGIN { printf "%.1f", k / 1048576 }')
if awk -v k="$free_kib" -v g="$need_gib" 'BEGIN { exit !(k < g * 1048576) }'; then
    echo "$what needs about $need_gib GiB free for $dir (its peak while installing); $free_gib GiB is free there (counting what it holds)" >&2
    exit 1
fi
