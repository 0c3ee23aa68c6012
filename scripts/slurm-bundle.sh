#!/usr/bin/env bash
# Packs this machine's Slurm (Debian's slurm-wlm 22.05) and munge into one folder that runs on a
# machine where they cannot be installed (a GPU machine with no package registry), without
# writing outside that folder: the daemons, clients and plugins, and every shared library they
# load except the C library's own, which the target's (same or newer) glibc provides.
#
# Usage: scripts/slurm-bundle.sh DIR
#   then, on the other machine: NVFP4_SLURM_BUNDLE=DIR scripts/slurm-private.sh start ...
#
# Each program in DIR/bin is a wrapper that runs the real one (DIR/real) through the system's
# dynamic loader with DIR/lib first on its library path. The path is the loader's argument, not
# LD_LIBRARY_PATH, so nothing started by a job (the suite, Python, torch) sees these libraries.
# slurm.conf's PluginDir and slurmd's -d (the slurmstepd it starts) point into DIR, which is what
# scripts/slurm-private.sh does when NVFP4_SLURM_BUNDLE is set.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: slurm-bundle.sh DIR" >&2; exit 2; }
dir=$1
plugins=/usr/lib/x86_64-linux-gnu/slurm-wlm
programs=(slurmctld slurmd slurmstepd sbatch squeue sinfo scontrol scancel sacct srun munged munge unmunge)
for p in "${programs[@]}"; do
  command -v "$p" >/dev/null || { echo "slurm-bundle.sh: $p is not installed (scripts/slurm-private.sh install)" >&2; exit 77; }
done
[[ -d "$plugins" ]] || { echo "slurm-bundle.sh: no $plugins" >&2; exit 77; }

rm -rf "$dir"
mkdir -p "$dir"/{bin,real,lib,plugins}
for p in "${programs[@]}"; do cp -L "$(command -v "$p")" "$dir/real/$p"; done
cp -L "$plugins"/lib*.so* "$dir/lib/"   # libslurmfull.so lives with the plugins
cp -a "$plugins"/. "$dir/plugins/"
find "$dir/plugins" -type l -exec sh -c 'cp -L --remove-destination "$(readlink -f "$1")" "$1"' _ {} \;

# The library closure, by ldd of every program and plugin; the C library's own stay behind.
glibc='^(libc|libm|libdl|librt|libpthread|libresolv|libutil|libnsl|libanl|ld-linux-x86-64|linux-vdso)\.'
{ ldd "$dir"/real/* "$dir"/plugins/*.so 2>/dev/null || true; } |
  awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    [[ "$name" =~ $glibc ]] && continue
    [[ -e "$dir/lib/$name" ]] || cp -L "$path" "$dir/lib/$name"
  done

loader=/lib64/ld-linux-x86-64.so.2
for p in "${programs[@]}"; do
  cat > "$dir/bin/$p" <<EOF
#!/bin/sh
d=\$(cd "\$(dirname "\$0")/.." && pwd)
exec $loader --library-path "\$d/lib" --argv0 "\$0" "\$d/real/$p" "\$@"
EOF
  chmod +x "$dir/bin/$p"
done
echo "slurm-bundle.sh: $(du -sh "$dir" | cut -f1) in $dir ($(ls "$dir/lib" | wc -l) libraries, $(ls "$dir/plugins" | wc -l) plugins)"
