#!/bin/bash
# Seeds fuzz/corpus/<target>/ (ignored by git) from the repository's fixtures.
# Run from the repository root: fuzz/seed.sh
# Needs python3 (to pull data.pkl out of the zip fixtures) and builds the CLI
# (to convert fixtures to safetensors).
set -euo pipefail
F=crates/stowage/tests/fixtures
C=fuzz/corpus
# zip_write starts empty: its input is records to write, not an archive.
mkdir -p $C/{pickle,pickle_disasm,zip,zip_write,legacy,safetensors,load,load_modes,manifest,convert_manifest,inert,dcp_metadata,sharded_index,scan}
for m in $F/dcp/*/.metadata $F/dcp/hostile/*/.metadata; do
    cp "$m" "$C/dcp_metadata/$(basename "$(dirname "$m")")"
done
for i in $F/sharded/*/*.index.json; do
    cp "$i" "$C/sharded_index/$(basename "$(dirname "$i")")"
done
for p in $F/*.pt $F/hostile/*.pt; do
    b=$(basename "$p" .pt)
    case "$p" in $F/hostile/*) b="h_$b" ;; esac
    cp "$p" "$C/load/$b"
    if [ "$(head -c 4 "$p" | od -An -tx1 | tr -d ' \n')" = "504b0304" ]; then
        cp "$p" "$C/zip/$b"
    else
        cp "$p" "$C/legacy/$b"
    fi
done
cargo build --release -p stowage-cli
st=$(mktemp -d)
for p in $F/*.pt; do
    b=$(basename "$p" .pt)
    # Some fixtures (big-endian, quantized, legacy classes) have no safetensors form.
    ./target/release/stowage convert "$p" "$st/$b.safetensors" >/dev/null 2>&1 || true
done
cp "$st"/* $C/safetensors/
cp "$st"/* $C/load/
rm -r "$st"
python3 - <<'PY'
import glob, os, zipfile
F = 'crates/stowage/tests/fixtures'
for p in glob.glob(F + '/*.pt') + glob.glob(F + '/hostile/*.pt'):
    b = os.path.basename(p)[:-3]
    try:
        z = zipfile.ZipFile(p)
        for n in z.namelist():
            if n.endswith('.pkl'):
                open('fuzz/corpus/pickle/%s_%s' % (b, n.replace('/', '_')), 'wb').write(z.read(n))
    except Exception:
        data = open(p, 'rb').read()
        if data[:2] == b'\x80\x02':
            open('fuzz/corpus/pickle/%s_legacy' % b, 'wb').write(data)
PY
# pickle_disasm reads the same bare pickles as pickle.
cp $C/pickle/* $C/pickle_disasm/
# load_modes: the first byte picks the load option (fuzz_targets/load_modes.rs),
# so every torch fixture goes in once per option.
for p in $F/*.pt $F/hostile/*.pt; do
    b=$(basename "$p" .pt)
    case "$p" in $F/hostile/*) b="h_$b" ;; esac
    for m in 0 1 2 3 4 5; do
        { printf "\\$(printf '%03o' "$m")"; cat "$p"; } > "$C/load_modes/m${m}_$b"
    done
done
# manifest: the first byte picks the entry whose digest is changed
# (fuzz_targets/manifest.rs); the rest is a checkpoint, torch or safetensors.
for p in $C/load/*; do
    { printf '\001'; cat "$p"; } > "$C/manifest/$(basename "$p")"
done
# convert_manifest: the first byte picks the output (fuzz_targets/convert_manifest.rs).
for p in $C/load/*; do
    for m in 0 1 2 3; do
        { printf "\\$(printf '%03o' "$m")"; cat "$p"; } > "$C/convert_manifest/m${m}_$(basename "$p")"
    done
done
# Both: files that reach the kernel of sixteen lanes, where torch imports.
py="${STOWAGE_TORCH_PYTHON:-python3}"
if "$py" -c "import torch" >/dev/null 2>&1; then
    lanes=$(mktemp -d)
    "$py" fuzz/seed_lanes.py "$lanes"
    for p in "$lanes"/*.pt; do
        for m in 0 1 3; do
            { printf "\\$(printf '%03o' "$m")"; cat "$p"; } > "$C/manifest/x16_m${m}_$(basename "$p")"
            { printf "\\$(printf '%03o' "$m")"; cat "$p"; } > "$C/convert_manifest/x16_m${m}_$(basename "$p")"
        done
    done
    rm -r "$lanes"
fi
# inert: the first byte picks inert (0) or the decoded names allowed (1).
for p in $F/wild/*.pt $F/wild/*.ckpt $F/hostile/*.pt; do
    b=$(basename "$p")
    for m in 0 1; do
        { printf "\\$(printf '%03o' "$m")"; cat "$p"; } > "$C/inert/m${m}_$b"
    done
done
# scan: every kind of file it reads (zip, legacy, Python 2 era, bare pickles,
# archives back to back, TorchScript) and the hostile ones.
for p in $F/*.pt $F/hostile/*.pt $F/py2/*.pt $F/scan/*.pt $F/scan/*.pkl $F/scan/*.distcp; do
    d=$(basename "$(dirname "$p")")
    cp "$p" "$C/scan/${d}_$(basename "$p")"
done
for d in $C/*; do echo "$d: $(ls "$d" | wc -l) files"; done
