#!/usr/bin/env python3
"""Where a full run's instructions go: runs the `latency` benchmark's mock runs (10,000 + 1,000,
no native ones) under callgrind and prints their self cost by part, per run, and the functions
that allocate most often. The compile cache is warmed by a run outside callgrind first, so the
one-off load is small (it is listed apart). Instruction counts do not depend on what else the machine
is doing, so two profiles can be compared on a busy machine.

usage: scripts/profile-run.py BENCH_BINARY [OUT_DIR]    (`make profile` passes the latency bench)

SEAM_PROFILE=wasmtime_floor profiles the floor's runs instead (wasmtime alone on Seam's engine,
instantiate + the mock's `run` + drop), so that the two tables show where Seam's extra
instructions go.
"""

import os
import re
import subprocess
import sys

RUNS = 11_000  # measured + warm-up mock runs in benches/latency.rs

# Parts, first match wins; a function's self cost is counted once.
PARTS = [
    ("guest code (compiled Wasm)", r"^\?\?\?:0x0"),
    ("host start and load (once, not per run)", r"sha2|blake3|memmap2|cranelift|regalloc|wasmparser|CompileCache|postcard|gimli|object::|Linkers|Host::new"),
    ("memset / memcpy (slot reset, argument copies)", r"memset|memmove|memcpy|memcmp"),
    ("malloc / free", r"malloc|free|_int_|arena\.c|__rdl_|__rust_alloc|__rust_dealloc|realloc|unlink_chunk|tcache"),
    ("wasmtime: instantiation", r"Instantiator|Instance::new|lookup_vmdef|func_loc|get_func_ref|funcref|OwnedImports|store_invariant|ModuleRegistry|allocate_instance|FuncKey|index_allocator|InstancePre|trampoline|component::instance|ComponentInstance"),
    ("wasmtime: store teardown, pool", r"drop_in_place<wasmtime|StoreOpaque as core::ops::drop|pagemap|MemoryPool|TablePool|deallocate|StackPool"),
    ("wasmtime: calls, fibers, lifting and lowering", r"wasmtime|fiber|Lower|Lift|typecheck|ComponentType"),
    ("tokio: watch / notify", r"tokio::sync"),
    ("tokio: tasks, wakes, timers", r"tokio::"),
    ("seam (host code)", r"seam_"),
    ("wasmtime-wasi", r"wasmtime_wasi|cap_|rand"),
    ("strings, hashing, formatting", r"hash|Hasher|serde|String|str>|fmt|alloc::"),
]


def main():
    binary = sys.argv[1]
    out_dir = sys.argv[2] if len(sys.argv) > 2 else "target/profile"
    os.makedirs(out_dir, exist_ok=True)
    data = os.path.join(out_dir, "callgrind.out")
    # valgrind cannot reserve the address space of a 1,000-slot pool.
    only = os.environ.get("SEAM_PROFILE", "seam")
    env = dict(os.environ, SEAM_BENCH_POOL="8", SEAM_BENCH_ONLY=only)
    subprocess.run([binary], env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={data}", binary],
        env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    text = subprocess.run(
        ["callgrind_annotate", "--threshold=100", data], capture_output=True, text=True, check=True
    ).stdout
    total, parts = 0, {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)", line)
        if not m:
            continue
        count, name = int(m.group(1).replace(",", "")), m.group(2)
        if "PROGRAM TOTALS" in name:
            total = count
            continue
        part = next((p for p, rx in PARTS if re.search(rx, name)), "other")
        parts[part] = parts.get(part, 0) + count
    print(f"callgrind: {total / 1e6:.0f}M instructions for {RUNS} `{only}` runs and the host's start")
    print("| part | instructions | per mock run | share |")
    print("|---|---:|---:|---:|")
    for part, count in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"| {part} | {count / 1e6:.1f}M | {count / RUNS / 1000:.1f}k | {100 * count / total:.1f}% |")
    print()
    print("Allocations by caller (calls to __rust_alloc):")
    for caller, n in top_callers(data, "__rustc::__rust_alloc")[:15]:
        print(f"  {n / RUNS:6.1f} per mock run  {caller[:120]}")


def top_callers(data, callee_prefix):
    names, callers = {}, {}
    current_fn = current_callee = None
    with open(data) as f:
        for line in f:
            if line.startswith(("fn=", "cfn=")):
                m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line.strip())
                if not m:
                    continue
                if m.group(2):
                    names[m.group(1)] = m.group(2)
                if line.startswith("fn="):
                    current_fn = m.group(1)
                else:
                    current_callee = m.group(1)
            elif line.startswith("calls=") and current_callee:
                n = int(line.split("=")[1].split()[0])
                by = callers.setdefault(current_callee, {})
                by[current_fn] = by.get(current_fn, 0) + n
    out = {}
    for fid, name in names.items():
        if name.startswith(callee_prefix):
            for caller, n in callers.get(fid, {}).items():
                out[names.get(caller, caller)] = out.get(names.get(caller, caller), 0) + n
    return sorted(out.items(), key=lambda kv: -kv[1])


if __name__ == "__main__":
    main()
