#!/usr/bin/env python3
"""Benchmarks onnx2ggml against ONNX Runtime (onnxruntime-node) and PyTorch on the same
models, interleaved in one run, and writes docs/performance.md.

usage: bench/run_bench.py [--models resnet50,mobilenet_v2,vae_decoder,...] [--rounds 3] [--threads 2] [--repeat 2]
Models are those of tests/models/export_models.py and tests/models/export_sd.py (exported into
--work once; an existing export is reused). Each round starts one process per framework (order
rotated per round), each warms up once and times --repeat runs of the compute (fast models: up to
100, about a second of runs, from one probe run of onnx2ggml; models under 0.1 s a run get twice
the rounds, so that the shared machine's slow and fast phases fall on every framework alike); the
reported time is the median over all timed runs of all rounds (rounds x repeat, at least 5). Peak resident
memory is each process's maximum RSS (its largest round): weights, activations and runtime.
Needs: scripts/setup.sh --bench (onnxruntime-node in bench/node_modules), build/onnx2ggml.
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import datetime
import json

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"


def parse(out):
    """The last line of every bench: median_ms=... min_ms=... peak_rss_mb=... times_ms=t1,t2,..."""
    m = re.search(r"median_ms=([\d.]+) min_ms=([\d.]+) peak_rss_mb=([\d.]+) times_ms=([\d.,]+)", out)
    if not m:
        raise RuntimeError("no timing line in:\n" + out)
    return float(m.group(1)), float(m.group(2)), float(m.group(3)), [float(x) for x in m.group(4).split(",")]


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def model_inputs(d):
    """The inputs of an exported model folder: [(name, .npy path)] (meta.json, else input.npy)."""
    meta = os.path.join(d, "meta.json")
    if os.path.exists(meta):
        with open(meta) as f:
            return [(n, os.path.join(d, f"in_{n}.npy")) for n in json.load(f)["inputs"]]
    return [("input", os.path.join(d, "input.npy"))]


def o2g_cmd(bin, onnx, ins, threads, warmup, repeat):
    return [bin, "bench", onnx, *[x for n, p in ins for x in ("--input", f"{n}={p}")], "--threads", str(threads),
            "--warmup", str(warmup), "--repeat", str(repeat)]


def ort_cmd(onnx, ins, threads, warmup, repeat):
    return ["node", os.path.join(HERE, "ort_bench.js"), onnx, ",".join(f"{n}={p}" for n, p in ins), str(threads),
            str(warmup), str(repeat)]


def plan_runs(bin, onnx, ins, threads, rounds, repeat):
    """Runs per process and rounds from one probe run of onnx2ggml: fast models time more runs per
    process (up to about one second of them, at most 100) and get twice the rounds (under 0.1 s a
    run), so that the shared machine's noise is averaged out as well as on the slow ones."""
    res = subprocess.run(o2g_cmd(bin, onnx, ins, threads, 1, 1), capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"onnx2ggml failed on {onnx}:\n{res.stdout}\n{res.stderr}")
    probe_ms = parse(res.stdout)[0]
    return (rounds * 2 if probe_ms < 100 else rounds), max(repeat, min(100, int(1000 / max(probe_ms, 1.0))))


def interleaved(cmds, rounds):
    """Runs every command of {framework: argv} once per round, the order rotated per round; returns
    ({framework: median ms over all timed runs}, {framework: peak RSS MB of its largest round})."""
    times = {k: [] for k in cmds}
    rss = {k: 0.0 for k in cmds}
    order = list(cmds)
    for r in range(rounds):
        for k in order[r % len(order):] + order[:r % len(order)]:
            res = subprocess.run(cmds[k], capture_output=True, text=True)
            if res.returncode != 0:
                raise RuntimeError(f"{k} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
            med, mn, mb, runs = parse(res.stdout)
            times[k].extend(runs)
            rss[k] = max(rss[k], mb)
    return {k: statistics.median(v) for k, v in times.items()}, rss


def write_section(path, tag, lines):
    """Replaces the part of `path` between <!-- TAG:begin --> and <!-- TAG:end --> (appended when
    missing): bench/run_bench.py and bench/zoo.py each write their own part of docs/performance.md."""
    begin, end = f"<!-- {tag}:begin (generated, do not edit by hand) -->", f"<!-- {tag}:end -->"
    text = open(path).read() if os.path.exists(path) else "# Performance\n"
    body = begin + "\n" + "\n".join(lines).rstrip("\n") + "\n" + end
    i = text.find(begin[:len(f"<!-- {tag}:begin")])
    j = text.find(end)
    if i >= 0 and j > i:
        text = text[:i] + body + text[j + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + body + "\n"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet50,mobilenet_v2,vae_decoder,vae_decoder_512,clip_text,unet")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "onnx2ggml"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench-models"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "performance.md"))
    a = ap.parse_args()
    models = a.models.split(",")
    if a.rounds * a.repeat < 5:
        sys.exit("rounds x repeat must be at least 5")
    # the SD component table, read in a child process: this one must not hold torch (a child's peak
    # RSS, as the kernel counts it, starts from the parent's resident memory at fork)
    sd_names = subprocess.run([PY, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import export_sd; print(*export_sd.MODELS)",
                               os.path.join(ROOT, "tests", "models")], capture_output=True, text=True, check=True).stdout.split()
    for name in models:
        if os.path.exists(os.path.join(a.work, name, "model.onnx")):
            continue
        script = "export_sd.py" if name in sd_names else "export_models.py"
        subprocess.run([PY, os.path.join(ROOT, "tests", "models", script), a.work, name], check=True, capture_output=True)
    t = str(a.threads)
    rows = []
    for name in models:
        d = os.path.join(a.work, name)
        onnx = os.path.join(d, "model.onnx")
        ins = model_inputs(d)
        rounds, repeat = plan_runs(a.bin, onnx, ins, a.threads, a.rounds, a.repeat)
        o2g = o2g_cmd(a.bin, onnx, ins, a.threads, 1, repeat) + ["--backend"]
        cmds = {
            "onnx2ggml auto": o2g + ["auto"],
            "onnx2ggml cpu": o2g + ["cpu"],
            "onnxruntime": ort_cmd(onnx, ins, a.threads, 1, repeat),
            "pytorch": [PY, os.path.join(HERE, "torch_bench.py"), name, ",".join(f"{n}={p}" for n, p in ins), t, "1", str(repeat)],
        }
        med, rss = interleaved(cmds, rounds)
        rows.append((name, med, rss, rounds * repeat))
        print(f"{name}: " + ", ".join(f"{k} {med[k]:.1f} ms ({rss[k]:.0f} MB)" for k in cmds), flush=True)

    lines = [
        "Generated by `bench/run_bench.py` (do not edit by hand). CPU, fp32, batch 1, "
        f"{a.threads} threads for every framework; ONNX Runtime is onnxruntime-node 1.30 (intraOpNumThreads {a.threads}, "
        "graph optimizations on), PyTorch is Debian's torch 1.13 in eager mode with no_grad. Frameworks run interleaved in "
        f"one run ({a.rounds} rounds, each a fresh process timing {a.repeat} runs after one warm-up, or up to 100 runs "
        f"when they take less than a second, the order rotated per round; models under 0.1 s a run: {2 * a.rounds} rounds); times are medians over all timed runs, ratios are onnx2ggml `auto` / other (below 1 = onnx2ggml faster). "
        "Peak RSS is each process's maximum resident memory (weights, activations, runtime).",
        "",
        f"- machine: {cpu_model()}, {os.cpu_count()} cores; date {datetime.date.today()}",
        "- onnx2ggml `auto`: the oneDNN backend (convolutions, matrix products) + ggml's CPU backend for the rest; "
        "`cpu`: pure ggml 0.23.0 (with llamafile's sgemm)",
        "- models: tests/models/export_models.py (torchvision) and tests/models/export_sd.py (SD 1.5 components; "
        "`vae_decoder` = 32x32 latent -> 256x256 image, `vae_decoder_512` = 64x64 -> 512x512, `clip_text` = 77 tokens, "
        "`unet` = one full-size UNet step at a 32x32 latent)",
        "",
        "| model | onnx2ggml auto ms | onnx2ggml cpu ms | ONNX Runtime ms | PyTorch ms | auto / ORT | auto / PyTorch | cpu / ORT | "
        "peak RSS MB: auto / cpu / ORT / PyTorch | timed runs each |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, med, rss, runs in rows:
        au, cp, ort, pt = med["onnx2ggml auto"], med["onnx2ggml cpu"], med["onnxruntime"], med["pytorch"]
        lines.append(f"| {name} | {au:.1f} | {cp:.1f} | {ort:.1f} | {pt:.1f} | {au / ort:.2f} | {au / pt:.2f} | {cp / ort:.2f} | "
                     f"{rss['onnx2ggml auto']:.0f} / {rss['onnx2ggml cpu']:.0f} / {rss['onnxruntime']:.0f} / {rss['pytorch']:.0f} | "
                     f"{runs} |")
    lines += [
        "",
        "## Where the time goes",
        "",
        "`onnx2ggml run MODEL --profile` prints the time per ggml op and backend (each node alone: a convolution "
        "and the bias, residual sum and activation fused into it show as separate rows). With `auto`, the "
        "convolutions are oneDNN primitives with the bias, the residual sum (ResNet's and mobilenet_v2's skip "
        "connections, the VAE's resnet blocks) and the ReLU/Clip as post-ops; on maps of 56x56 or more, for "
        "depthwise convolutions and wherever a tensor goes from one convolution to others, in oneDNN's blocked "
        "layouts (nChw16c; a reordered copy of the kernel kept: the difference in peak RSS), with Winograd "
        "(F(4x4,3x3) or F(2x2,3x3), 3-5x faster than direct) for 3x3 stride-1 convolutions on maps of 14x14 or "
        "more; on large maps (the VAE's 128x128 to 512x512) Winograd's transform buffers would take up to 1.2 GB, "
        "so the map is cut into bands of rows that fit a budget (half the activations' memory), one primitive per "
        "band. Elsewhere (the UNet's and the VAE's 32x32 maps) plain NCHW/OIHW, no copy of the weights. A tensor "
        "whose readers are all convolutions, max poolings or residual sums (a ResNet's whole residual stream from "
        "the stem on, mobilenet_v2's blocks) stays in the blocked layout: no reorder, no separate add or ReLU pass "
        "(channel counts that are not a multiple of 16, mobilenet_v2's 24, padded with zeros to one). Each oneDNN node's "
        "primitives and arguments are prepared on its first run and replayed after. "
        "GroupNorm (the VAE, the UNet) runs as two passes, its statistics then one oneDNN binary primitive for the "
        "normalization, the per-channel affine and the SiLU that follows (ggml: four passes, the affine element by "
        "element). Sigmoid (CLIP's QuickGELU) and erf-GELU (the UNet's GEGLU) are oneDNN eltwise primitives. The UNet's "
        "and CLIP's time is mostly matrix products (oneDNN matmul, reading ggml's weights in place, in ggml's "
        "layout; ONNX Runtime packs them once into its own) and the UNet's 32x32 convolutions (direct, in NCHW: "
        "Winograd there would need a transformed copy of every kernel, 4x its size). What ONNX "
        "Runtime does that onnx2ggml does not yet: blocked layouts kept through the normalizations too "
        "(onnx2ggml reorders around every GroupNorm), and weights kept only in their reordered form (onnx2ggml "
        "keeps ggml's copy as well).",
        "",
    ]
    write_section(a.out, "bench", lines)
    print("wrote " + a.out)


if __name__ == "__main__":
    main()
