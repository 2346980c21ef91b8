# The libFuzzer targets, read by this project (CMakeLists.txt builds each) and by the main
# build's tests/CMakeLists.txt (one ctest fuzz.<target> each). A target named here needs its
# harness <target>.cc and its seed corpus corpus/<target>/.
set(TRAINYARD_FUZZ_TARGETS
    fuzz_tfrecord
    fuzz_yt8m_parse
    fuzz_decode_image
    fuzz_sstable
    fuzz_checkpoint_v1
    fuzz_checkpoint_v2
    fuzz_checkpoint_state
    fuzz_safetensors
    fuzz_event_file
    fuzz_pipeline_config
    fuzz_json
    fuzz_elf_symbols
    fuzz_label_map
    fuzz_coco_json)
