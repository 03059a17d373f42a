#!/usr/bin/env bash
# Packs what `make bench-scale` needs onto a lent many-core machine, which has no package
# registry and no iproute2, ethtool or libpcap to count on: a stripped release wirespeed, the
# host's ip, ethtool and taskset, every library they load but the C runtime, and wrappers that
# run them with those libraries. Everything goes to .dev/ (ignored by git); pass `.dev` in the
# device tool's carry list, then run bench/many-core/scale.sh there. PERF=1 adds perf and its
# libraries (about 33 MiB more) for bench/many-core/profile-engine.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEV=$ROOT/.dev
cd "$ROOT"
cargo build --release --bin wirespeed
rm -rf "$DEV"
mkdir -p "$DEV/bin" "$DEV/lib" "$DEV/wrap"
cp target/release/wirespeed "$DEV/bin/"
strip "$DEV/bin/wirespeed"
tools="ip ethtool taskset"
[ "${PERF:-0}" = 1 ] && tools="$tools perf"
for tool in $tools; do
    path=$(command -v "$tool") || { echo "pack: $tool is not installed here" >&2; exit 1; }
    cp -L "$path" "$DEV/bin/"
done
# The C runtime (libc, libm, the loader, libgcc) stays the machine's own: a carried libc
# would have to match its loader.
for bin in "$DEV"/bin/*; do
    ldd "$bin" | awk '/=>/ { print $3 }'
done | sort -u | grep -v -E '/(libc|libm|libgcc_s|ld-linux[^/]*)\.so' | while read -r lib; do
    cp -L "$lib" "$DEV/lib/"
done
for tool in wirespeed $tools; do
    cat > "$DEV/wrap/$tool" <<WRAP
#!/bin/sh
# Runs the carried $tool with the carried libraries (made by bench/many-core/pack.sh).
here=\$(CDPATH= cd -- "\$(dirname -- "\$0")/.." && pwd)
LD_LIBRARY_PATH=\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} exec "\$here/bin/$tool" "\$@"
WRAP
    chmod +x "$DEV/wrap/$tool"
done
size=$(du -sm "$DEV" | cut -f1)
echo "pack: .dev is ${size} MiB (the device tool carries 64 MiB in all):"
ls "$DEV/bin" "$DEV/lib" | sed 's/^/  /'
[ "$size" -lt 60 ] || { echo "pack: .dev is too big to carry" >&2; exit 1; }
