# Sourced by bench/emu_before_after.sh and bench/emu_instructions.sh: builds
# `cargo bench -p bloatlab-emu`'s emu_per_packet twice, against the working tree's and REV's
# PATHSPEC (crates/emu, or crates/emu/src to keep the working tree's bench file), into
# OUT/after and OUT/before. The caller's EXIT trap puts PATHSPEC back (git checkout HEAD).
emu_bench_path() { # -> path of the bench binary just built
    cargo bench -q -p bloatlab-emu --bench emu_per_packet --no-run --message-format=json 2>/dev/null |
        sed -n 's/.*"executable":"\([^"]*emu_per_packet[^"]*\)".*/\1/p' | tail -1
}
emu_bench_builds() { # REV PATHSPEC OUT
    cp "$(emu_bench_path)" "$3/after"
    git checkout -q "$1" -- "$2"
    cp "$(emu_bench_path)" "$3/before"
    git checkout -q HEAD -- "$2"
}
