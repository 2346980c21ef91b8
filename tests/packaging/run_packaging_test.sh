#!/usr/bin/env bash
# The `packaging` test: what a newcomer does with the packages, from the current build tree.
#
#   run_packaging_test.sh SOURCE_DIR BUILD_DIR WORK_DIR CPACK GENERATOR [MAKE_PROGRAM]
#
# 1. cpack -G DEB; the expected packages and nothing else; lintian reports no errors.
# 2. dpkg -i the .deb files; /usr/bin/trainyard plugins list shows every class the build tree
#    has, from /usr/lib/<triplet>/trainyard/plugins.
# 3. The template, as libtrainyard-dev installs it beside the author docs
#    (/usr/share/doc/libtrainyard-dev/examples/template, the same files as sdk/template), builds
#    against the installed SDK (find_package(Trainyard) in /usr) and its classes are listed and
#    created from --plugin_path; `cmake --install --strip` of it keeps it listable;
#    trainyard-conformance passes on it (when this tree builds the suite). Then what an author
#    does with the documented model, TemplateMlpModel: train a few steps with a non-default
#    --hidden_size on synthetic YouTube-8M data, then eval and predict from that train_dir
#    without repeating the option (the run's configuration travels with it); then that run
#    exported, and the C example of libtrainyard_infer (examples/infer/run_export.c beside the
#    author docs) built with `pkg-config trainyard-infer` and run on the export; trainyard-detect
#    (installed, and its source beside the example built with pkg-config) run on an exported
#    synth-shapes SSD, writing the same COCO results.
# 4. The packages are purged (always, by a trap) and their files are gone.
# 5. cpack -G RPM; each .rpm holds the same files as the .deb of the same name (rpm -qlp), and
#    its plugins are still listable after rpmbuild's own stripping.
#
# Installing packages needs root and dpkg: without them, or when a Trainyard package or file is
# already on the machine (the test would not leave it as it found it), it exits 77 (skipped),
# saying why. WORK_DIR is emptied and used for scratch files.
set -euo pipefail

src=$1
build=$2
work=$3
cpack=$4
generator=$5
make_program=${6:-}

skip() {
  echo "SKIPPED: $*"
  exit 77
}
fail() {
  echo "FAILED: $*" >&2
  exit 1
}
step() { echo "--- $*"; }

# Everything below must describe the machine as a user sees it, not this shell's settings.
unset TRAINYARD_PLUGIN_PATH CMAKE_PREFIX_PATH Trainyard_DIR DESTDIR

[ "$(id -u)" = 0 ] || skip "installing the .deb files needs root (CI runs as root)"
missing=()
for tool in dpkg dpkg-deb dpkg-shlibdeps dpkg-query rpmbuild rpm flock; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] || skip "missing ${missing[*]} (apt-get install \$(cat packaging/test-depends))"

# The packages install under /usr (CPACK_PACKAGING_INSTALL_PREFIX) with the build's libdir.
libdir=/usr/$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")
plugin_dir=$libdir/trainyard/plugins
soversion=$(sed -n 's/^CMAKE_PROJECT_VERSION_MAJOR:STATIC=//p' "$build/CMakeCache.txt")
[ -n "$soversion" ] || fail "no CMAKE_PROJECT_VERSION_MAJOR in $build/CMakeCache.txt"
packages=("libtrainyard-core$soversion" trainyard trainyard-backend-cpu libtrainyard-dev)
[ -e "$build/lib/trainyard/plugins/libtrainyard_cuda.so" ] && packages+=(trainyard-backend-cuda)
conformance=no
[ -x "$build/bin/trainyard-conformance" ] && conformance=yes

# One run at a time on a machine (two build trees' ctest runs would purge under each other).
exec 9>/var/lock/trainyard-packaging-test.lock
flock -w 600 9 || fail "another packaging test has held /var/lock/trainyard-packaging-test.lock for 10 minutes"

for pkg in "${packages[@]}"; do
  if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -qv "not-installed"; then
    skip "package $pkg is already on this machine; this test installs and purges the packages" \
         "and would not leave it as it found it (dpkg --purge ${packages[*]} first)"
  fi
done
owned=(/usr/bin/trainyard /usr/bin/trainyard-detect /usr/bin/trainyard-conformance "$libdir/libtrainyard_core.so.$soversion"
       "$libdir/libtrainyard_infer.so.$soversion" "$libdir/pkgconfig/trainyard-infer.pc"
       "$libdir/trainyard" "$libdir/cmake/Trainyard" /usr/include/trainyard /usr/share/trainyard)
for path in "${owned[@]}"; do
  [ ! -e "$path" ] || skip "$path already exists; the packages would overwrite it and purging them would remove it"
done

rm -rf "$work"
mkdir -p "$work"
installed=()
cleanup() {
  if [ ${#installed[@]} -gt 0 ]; then
    echo "--- purging ${installed[*]}"
    dpkg --purge "${installed[@]}" >"$work/purge.log" 2>&1 || cat "$work/purge.log"
    installed=()
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

run_logged() {  # run_logged LOG COMMAND...: runs the command, shows the log's end on failure
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    tail -n 60 "$log"
    fail "$* (log: $log)"
  fi
}

# --- 1. .deb files ---
step "cpack -G DEB"
run_logged "$work/cpack-deb.log" "$cpack" --config "$build/CPackConfig.cmake" -G DEB -B "$work/deb"
mapfile -t debs < <(find "$work/deb" -maxdepth 1 -name '*.deb' | sort)
got=$(for d in "${debs[@]}"; do dpkg-deb -f "$d" Package; done | sort | tr '\n' ' ')
want=$(printf '%s\n' "${packages[@]}" | sort | tr '\n' ' ')
[ "$got" = "$want" ] || fail "cpack made the packages [ $got] but the build tree should give [ $want]"
echo "packages: $got"

if command -v lintian >/dev/null 2>&1; then
  step "lintian"
  # lintian exits non-zero on errors with --fail-on error; warnings are listed, not fatal.
  if ! lintian --fail-on error "${debs[@]}" >"$work/lintian.log" 2>&1; then
    cat "$work/lintian.log"
    fail "lintian reports errors"
  fi
  grep -E '^[EW]: ' "$work/lintian.log" || true
else
  echo "lintian is not installed: not checking the .deb files with it"
fi

# --- 2. Install, and list the installed plugins ---
step "dpkg -i"
installed=("${packages[@]}")
run_logged "$work/dpkg-install.log" dpkg -i "${debs[@]}"

classes() {  # the "kind class" pairs of a `plugins list` output
  awk 'NR > 1 && NF >= 5 && $5 ~ /\.so$/ {print $1, $2}' "$1" | sort
}
step "/usr/bin/trainyard plugins list"
/usr/bin/trainyard plugins list >"$work/list-installed.txt" 2>"$work/list-installed.err" ||
  fail "/usr/bin/trainyard plugins list failed: $(cat "$work/list-installed.err")"
cat "$work/list-installed.txt"
[ ! -s "$work/list-installed.err" ] || fail "plugins list warned: $(cat "$work/list-installed.err")"
"$build/bin/trainyard" plugins list >"$work/list-build.txt" 2>/dev/null
expected=$(classes "$work/list-build.txt")
[ -n "$expected" ] || fail "the build tree's host lists no classes"
actual=$(classes "$work/list-installed.txt")
[ "$actual" = "$expected" ] ||
  fail "the installed host lists other classes than the build tree's:$(diff <(echo "$expected") <(echo "$actual"))"
for class in LogisticModel MoeModel YT8MAggregatedFeatureReader CrossEntropyLoss AdamOptimizer \
             LocalCollective cpu; do
  grep -Eq "^[a-z_]+ +$class +[^ ]+ +[^ ]+ +$plugin_dir/lib[a-z_]+\.so$" "$work/list-installed.txt" ||
    fail "$class is not listed from $plugin_dir"
done

# --- 3. The template plugin against the installed SDK ---
doc_dir=/usr/share/doc/libtrainyard-dev
installed_template=$doc_dir/examples/template
step "the author docs and the template in $doc_dir"
[ -f "$doc_dir/CONTRACT.md" ] || fail "libtrainyard-dev does not install $doc_dir/CONTRACT.md"
for file in CMakeLists.txt README.md template_plugin.cc; do
  cmp -s "$src/sdk/template/$file" "$installed_template/$file" ||
    fail "$installed_template/$file is not sdk/template/$file"
done
step "$installed_template against the installed SDK"
generator_args=(-G "$generator")
[ -n "$make_program" ] && generator_args+=("-DCMAKE_MAKE_PROGRAM=$make_program")
template=$work/template
run_logged "$work/template-configure.log" cmake -S "$installed_template" -B "$template" \
  "${generator_args[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON \
  -DCMAKE_INSTALL_PREFIX="$work/template-prefix"
found=$(sed -n 's/^Trainyard_DIR:PATH=//p' "$template/CMakeCache.txt")
[ "$found" = "$libdir/cmake/Trainyard" ] || fail "find_package(Trainyard) found '$found', not $libdir/cmake/Trainyard"
run_logged "$work/template-build.log" cmake --build "$template"
template_so=$template/libtemplate_plugin.so
[ -f "$template_so" ] || fail "the template build made no $template_so"

/usr/bin/trainyard plugins list --plugin_path="$template" >"$work/list-template.txt" 2>&1 ||
  fail "plugins list --plugin_path=$template failed: $(cat "$work/list-template.txt")"
grep -E "TemplateLinearModel|TemplateMlpModel|TemplateSquaredLoss" "$work/list-template.txt"
grep -Eq "^model +TemplateLinearModel +template_plugin +0\.1\.0 +$template_so$" "$work/list-template.txt" &&
  grep -Eq "^model +TemplateMlpModel +template_plugin +0\.1\.0 +$template_so$" "$work/list-template.txt" &&
  grep -Eq "^loss +TemplateSquaredLoss +template_plugin +0\.1\.0 +$template_so$" "$work/list-template.txt" ||
  fail "the template's classes are not listed: $(cat "$work/list-template.txt")"
/usr/bin/trainyard plugins check --plugin_path="$template" >"$work/check-template.txt" 2>&1 || true
grep -Eq "^ok +model +TemplateLinearModel" "$work/check-template.txt" &&
  grep -Eq "^ok +model +TemplateMlpModel" "$work/check-template.txt" &&
  grep -Eq "^ok +loss +TemplateSquaredLoss" "$work/check-template.txt" ||
  fail "plugins check did not pass the template's classes: $(cat "$work/check-template.txt")"

# Installed (and stripped) as its README says, it is still a plugin the host lists.
run_logged "$work/template-install.log" cmake --install "$template" --strip
installed_so=$(find "$work/template-prefix" -name libtemplate_plugin.so)
[ -n "$installed_so" ] && [ "${installed_so%/trainyard/plugins/libtemplate_plugin.so}" != "$installed_so" ] ||
  fail "cmake --install put the template at '$installed_so', not under <libdir>/trainyard/plugins"
# To a file first: with pipefail, `grep -q` closing the pipe early would fail the host's write of
# the rest of the list (SIGPIPE) and so the check, at random.
/usr/bin/trainyard plugins list --plugin_path="$(dirname "$installed_so")" \
  >"$work/list-installed-template.txt" 2>&1 || true
grep -q TemplateLinearModel "$work/list-installed-template.txt" ||
  fail "the installed, stripped $installed_so is not listed: $(cat "$work/list-installed-template.txt")"

if [ "$conformance" = yes ]; then
  step "trainyard-conformance $template_so"
  [ -x /usr/bin/trainyard-conformance ] || fail "this tree builds trainyard-conformance but the packages do not install /usr/bin/trainyard-conformance"
  run_logged "$work/conformance.log" /usr/bin/trainyard-conformance "$template_so"
  tail -n 5 "$work/conformance.log"
  # The documented model at the option value the run below uses.
  run_logged "$work/conformance-mlp.log" /usr/bin/trainyard-conformance "$template_so" \
    --option=TemplateMlpModel.hidden_size=16 --gtest_filter='Model/TemplateMlpModel.*'
  tail -n 2 "$work/conformance-mlp.log"
else
  echo "this build tree has no trainyard-conformance: not running the conformance suite"
fi

step "TemplateMlpModel --hidden_size=16: train, eval and predict"
data=$work/yt8m
run_logged "$work/synth.log" /usr/bin/trainyard data synth-yt8m --output_dir "$data" \
  --num_videos 200 --num_classes 10 --num_shards 1 --feature_sizes 32,8
run=$work/mlp-run
run_logged "$work/mlp-train.log" /usr/bin/trainyard train --plugin_path="$template" \
  --model=TemplateMlpModel --hidden_size=16 --train_data_pattern="$data/train-*.tfrecord" \
  --train_dir="$run" --num_classes=10 --feature_names=mean_rgb,mean_audio --feature_sizes=32,8 \
  --batch_size=32 --max_steps=20
tail -n 2 "$work/mlp-train.log"
# Created with the default hidden_size (32), eval would find the checkpoint's [40, 16] hidden
# weights the wrong shape: passing proves the option came from train_dir.
run_logged "$work/mlp-eval.log" /usr/bin/trainyard eval --plugin_path="$template" \
  --eval_data_pattern="$data/validate-*.tfrecord" --train_dir="$run" --run_once
tail -n 2 "$work/mlp-eval.log"
run_logged "$work/mlp-predict.log" /usr/bin/trainyard predict --plugin_path="$template" \
  --train_dir="$run" --input_data_pattern="$data/validate-*.tfrecord" \
  --output_file="$work/mlp-predictions.csv"
predicted=$(($(wc -l <"$work/mlp-predictions.csv") - 1))
[ "$predicted" = 40 ] ||
  fail "predict wrote $predicted predictions for the 40 validation videos: $(head -n 3 "$work/mlp-predictions.csv")"
echo "TemplateMlpModel --hidden_size=16: trained, evaluated, and predicted $predicted videos"

step "the C inference library's example against the installed package (pkg-config trainyard-infer)"
run_logged "$work/mlp-export.log" /usr/bin/trainyard export --plugin_path="$template" \
  --train_dir="$run" --export_dir="$work/mlp-export"
example=/usr/share/doc/libtrainyard-dev/examples/infer/run_export.c
[ -f "$example" ] || fail "libtrainyard-dev installs no $example"
command -v pkg-config >/dev/null 2>&1 || fail "pkg-config is not installed (packaging/test-depends)"
infer_flags=$(pkg-config --cflags --libs trainyard-infer) ||
  fail "pkg-config knows no trainyard-infer: $(pkg-config --cflags --libs trainyard-infer 2>&1)"
run_logged "$work/run_export-build.log" cc -std=c99 -Wall -Werror "$example" $infer_flags \
  -o "$work/run_export"
TRAINYARD_PLUGIN_PATH="$template" "$work/run_export" "$work/mlp-export" >"$work/run_export.log" 2>&1 ||
  fail "run_export on the exported TemplateMlpModel: $(cat "$work/run_export.log")"
grep -q "^output predictions \[-1, 10\]$" "$work/run_export.log" &&
  grep -Eq "^predictions\[0\]:( [0-9.]+){10}$" "$work/run_export.log" ||
  fail "run_export printed: $(cat "$work/run_export.log")"
grep -q "Trainyard::infer" "$libdir/cmake/Trainyard/TrainyardTargets.cmake" ||
  fail "find_package(Trainyard) gives no Trainyard::infer ($libdir/cmake/Trainyard/TrainyardTargets.cmake)"
cat "$work/run_export.log"

step "trainyard-detect, and its source built against the installed package, on an exported SSD"
# A synth-shapes SSD (the installed config made 64x64, one step), exported; one image written as
# a PNG by python3's zlib; both binaries write the same detections.json, a COCO results list.
ssd=$work/ssd
run_logged "$work/ssd-synth.log" /usr/bin/trainyard data synth-shapes --output_dir "$ssd/data" \
  --num_images 4 --num_val_images 1 --image_size 64 --num_shards 1
sed -e "s|/tmp/synth_shapes/|$ssd/data/|g" -e "s|height: 160|height: 64|" \
  -e "s|width: 160|width: 64|" -e "s|batch_size: 16|batch_size: 2|" \
  /usr/share/trainyard/configs/ssd_mobilenet_v1_synth_shapes.config >"$ssd/pipeline.config"
run_logged "$work/ssd-train.log" /usr/bin/trainyard train --pipeline_config_path="$ssd/pipeline.config" \
  --train_dir="$ssd/train" --max_steps=1
run_logged "$work/ssd-export.log" /usr/bin/trainyard export --train_dir="$ssd/train" \
  --export_dir="$ssd/export"
python3 - "$ssd/shapes.png" <<'PYTHON'
import struct, sys, zlib
h, w = 80, 100
rows = b"".join(b"\0" + bytes(c for x in range(w) for c in
                ((200, 40, 40) if 20 <= x < 60 and 20 <= y < 50 else (240, 240, 240)))
                for y in range(h))
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                              + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
PYTHON
detect_source=/usr/share/doc/libtrainyard-dev/examples/infer/trainyard_detect.cc
[ -f "$detect_source" ] || fail "libtrainyard-dev installs no $detect_source"
[ -x /usr/bin/trainyard-detect ] || fail "the trainyard package installs no /usr/bin/trainyard-detect"
run_logged "$work/detect-build.log" c++ -std=c++17 -Wall -Werror "$detect_source" $infer_flags \
  -o "$work/trainyard-detect"
run_logged "$work/detect-built.log" "$work/trainyard-detect" "$ssd/export" "$ssd/shapes.png" \
  --output_dir "$ssd/built" --label_map "$ssd/data/label_map.pbtxt" --min_score_threshold 0
run_logged "$work/detect-installed.log" /usr/bin/trainyard-detect "$ssd/export" "$ssd/shapes.png" \
  --output_dir "$ssd/installed"
[ -s "$ssd/built/shapes.png" ] || fail "trainyard-detect wrote no $ssd/built/shapes.png"
cmp -s "$ssd/built/detections.json" "$ssd/installed/detections.json" ||
  fail "the built and the installed trainyard-detect wrote different detections.json"
python3 - "$ssd/built/detections.json" <<'PYTHON' || fail "detections.json is not a COCO results list"
import json, sys
results = json.load(open(sys.argv[1]))
assert isinstance(results, list) and results, "no detections"
for r in results:
    assert set(r) == {"image_id", "category_id", "bbox", "score"}, r
    assert r["image_id"] == "shapes" and 1 <= r["category_id"] <= 4 and len(r["bbox"]) == 4, r
    assert 0 <= r["bbox"][0] <= 100 and 0 <= r["bbox"][1] <= 80 and 0 <= r["score"] <= 1, r
print("trainyard-detect:", len(results), "detections")
PYTHON

# --- 4. Purge ---
step "dpkg --purge"
run_logged "$work/purge.log" dpkg --purge "${packages[@]}"
installed=()
for path in "${owned[@]}" "$libdir/libtrainyard_core.so" /usr/share/doc/libtrainyard-dev; do
  [ ! -e "$path" ] || fail "$path is still there after dpkg --purge"
done

# --- 5. .rpm files ---
step "cpack -G RPM"
run_logged "$work/cpack-rpm.log" "$cpack" --config "$build/CPackConfig.cmake" -G RPM -B "$work/rpm"
for pkg in "${packages[@]}"; do
  deb=$(find "$work/deb" -maxdepth 1 -name "${pkg}_*.deb")
  rpm_file=$(find "$work/rpm" -maxdepth 1 -name "${pkg}-[0-9]*.rpm")
  [ -n "$rpm_file" ] || fail "no .rpm for $pkg in $work/rpm"
  rpm -qlp "$rpm_file" 2>/dev/null | sort >"$work/$pkg.rpm-files"
  dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {sub(/^\./, "", $6); print $6}' | sort >"$work/$pkg.deb-files"
  dpkg-deb -c "$deb" | awk '$1 ~ /^d/ {sub(/^\./, "", $6); sub(/\/$/, "", $6); print $6}' |
    sort >"$work/$pkg.deb-dirs"
  # Every file of the .deb is in the .rpm, and the .rpm has nothing else but directories.
  missing_files=$(comm -23 "$work/$pkg.deb-files" "$work/$pkg.rpm-files")
  extra=$(comm -13 "$work/$pkg.deb-files" "$work/$pkg.rpm-files" | comm -23 - "$work/$pkg.deb-dirs")
  [ -z "$missing_files" ] || fail "$(basename "$rpm_file") lacks $missing_files"
  [ -z "$extra" ] || fail "$(basename "$rpm_file") has files the .deb has not: $extra"
  echo "$(basename "$rpm_file"): $(wc -l <"$work/$pkg.deb-files") files, as in $(basename "$deb")"
done
expect_in() {  # expect_in PACKAGE PATH...: rpm -qlp of PACKAGE lists each PATH
  local pkg=$1
  shift
  for path in "$@"; do
    grep -qx "$path" "$work/$pkg.rpm-files" || fail "rpm -qlp of $pkg does not list $path"
  done
}
expect_in "libtrainyard-core$soversion" "$libdir/libtrainyard_core.so.$soversion" \
  "$libdir/libtrainyard_infer.so.$soversion"
expect_in trainyard /usr/bin/trainyard /usr/bin/trainyard-detect /usr/share/trainyard/configs/yt8m_logistic.config \
  "$plugin_dir/libtrainyard_models.so" "$plugin_dir/libtrainyard_readers.so" \
  "$plugin_dir/libtrainyard_losses.so" "$plugin_dir/libtrainyard_optimizers.so" \
  "$plugin_dir/libtrainyard_collectives.so"
expect_in trainyard-backend-cpu "$plugin_dir/libtrainyard_cpu.so"
expect_in libtrainyard-dev /usr/include/trainyard/plugin.h "$libdir/libtrainyard_core.so" \
  /usr/include/trainyard/infer.h /usr/include/trainyard/infer.hpp "$libdir/libtrainyard_infer.so" \
  "$libdir/pkgconfig/trainyard-infer.pc" \
  "$libdir/cmake/Trainyard/TrainyardConfig.cmake" "$libdir/cmake/Trainyard/TrainyardPlugin.cmake"
[ "$conformance" = no ] || expect_in libtrainyard-dev /usr/bin/trainyard-conformance
for pkg in "${packages[@]}"; do
  expect_in "$pkg" "/usr/share/doc/$pkg/copyright"
done

# rpmbuild strips binaries itself; the plugins must keep the dynamic symbols the host lists.
if command -v rpm2archive >/dev/null 2>&1; then
  mkdir -p "$work/rpm-root"
  (cd "$work/rpm-root" &&
    rpm2archive - <"$(find "$work/rpm" -maxdepth 1 -name 'trainyard-[0-9]*.rpm')" | tar -xz)
  "$build/bin/trainyard" plugins list --plugin_path="$work/rpm-root$plugin_dir" \
    >"$work/list-rpm.txt" 2>/dev/null || true
  from_rpm=$(awk -v dir="$work/rpm-root$plugin_dir/" 'index($5, dir) == 1 {print $1, $2}' \
               "$work/list-rpm.txt" | sort)
  libs=$(cd "$work/rpm-root$plugin_dir" && ls)
  want_rpm=$(awk -v libs="$libs" 'BEGIN {n = split(libs, l, "\n"); for (i = 1; i <= n; ++i) has[l[i]] = 1}
                                 NR > 1 && NF >= 5 {f = $5; sub(/.*\//, "", f); if (f in has) print $1, $2}' \
               "$work/list-build.txt" | sort)
  [ -n "$from_rpm" ] && [ "$from_rpm" = "$want_rpm" ] ||
    fail "the plugins in the trainyard .rpm list [$from_rpm], not [$want_rpm]"
  echo "the plugins in the trainyard .rpm list their $(echo "$from_rpm" | wc -l) classes"
fi
rm -rf "$work"
echo "packaging: ok"
