#!/usr/bin/env python3
"""onnx2ggml-sd against stable-diffusion.cpp: text-to-image with SD 1.5's architecture, the same weights,
prompt, seed, sampler, steps and size, side by side on this machine. Writes the table between the
markers of docs/text-to-image.md.

usage: bench/sd_pipeline.py [--sizes 256,512] [--weights f32,f16] [--steps 4] [--threads 2]
                            [--work build/sd-bench] [--sdcpp bench/sdcpp/build/bin/sd-cli] [--no-write]

Set-up (done here when missing): scripts/export_sd_folder.py writes the model folder (config sd15,
random weights with a fixed seed) and the same weights as one .safetensors in the original SD layout,
which stable-diffusion.cpp loads; bench/sdcpp/build.sh builds
stable-diffusion.cpp (commit 97d2990 with its ggml 8e800ce) from local clones.

Per row, each program runs once as a fresh process (interleaved: onnx2ggml-sd, then
stable-diffusion.cpp, per row): text encoding, the mean time of a UNet step (classifier-free guidance:
the conditional and unconditional halves), the VAE decode and the total from prompt to image (without
loading the weights), from each program's own log; peak RSS of each process (wait4). The tokenizers
differ (stable-diffusion.cpp carries CLIP's vocabulary; the folder has a small generated one): the
work per step is the same, the pictures are not (random weights make noise either way).
"""
import argparse
import datetime
import os
import re
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PY = "/usr/bin/python3"
DOC = os.path.join(ROOT, "docs", "text-to-image.md")
PROMPT = "a photograph of an astronaut riding a horse on the moon, detailed, 8k"
NEGATIVE = "blurry, low quality"


def run_measured(cmd, log):
    """Runs cmd; returns (stdout+stderr, seconds, peak RSS MB)."""
    t0 = time.time()
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)
    text = open(log).read()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{text[-3000:]}")
    return text, time.time() - t0, ru.ru_maxrss / 1024


def o2g_row(bin_, folder, size, weights, steps, threads, work):
    out = os.path.join(work, f"o2g_{size}_{weights}.png")
    text, wall, rss = run_measured(
        [bin_, "txt2img", "--model", folder, "--prompt", PROMPT, "--negative-prompt", NEGATIVE, "--steps", str(steps),
         "--cfg-scale", "7.5", "--seed", "42", "--width", str(size), "--height", str(size), "--sampler", "euler",
         "--threads", str(threads), "--weights", weights, "-o", out], out + ".log")
    m = re.search(r"load (\S+) ms, text (\S+) ms, (?:VAE encode \S+ ms, )?(\S+) ms per UNet step, VAE decode (\S+) ms "
                  r"\(\d+ \w+\), total (\S+) ms", text)
    if not m:
        sys.exit(f"onnx2ggml-sd: no timing line in {out}.log")
    load, text_ms, step, dec, total = (float(x) for x in m.groups())
    return dict(text=text_ms / 1000, step=step / 1000, decode=dec / 1000, total=total / 1000, load=load / 1000, rss=rss,
                wall=wall)


def sdcpp_row(bin_, ckpt, size, weights, steps, threads, work):
    out = os.path.join(work, f"sdcpp_{size}_{weights}.png")
    text, wall, rss = run_measured(
        [bin_, "-m", ckpt, "-p", PROMPT, "-n", NEGATIVE, "--steps", str(steps), "--cfg-scale", "7.5", "-s", "42",
         "-W", str(size), "-H", str(size), "--sampling-method", "euler", "--scheduler", "discrete", "-t", str(threads),
         "--type", weights, "-o", out], out + ".log")

    def sec(pattern):
        m = re.search(pattern + r"[^\n]*?taking ([\d.]+)s", text) or re.search(pattern + r" in ([\d.]+)s", text)
        if not m:
            sys.exit(f"stable-diffusion.cpp: no '{pattern}' in {out}.log")
        return float(m.group(1))

    sampling = sec("sampling completed")
    load = re.search(r"loading tensors completed, taking ([\d.]+)s", text)
    return dict(text=sec("get_learned_condition completed"), step=sampling / steps, decode=sec("decode_first_stage completed"),
                total=sec("generate_image completed"), load=float(load.group(1)) if load else float("nan"), rss=rss,
                wall=wall)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="256,512")
    ap.add_argument("--weights", default="f32,f16")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "sd-bench"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "onnx2ggml-sd"))
    ap.add_argument("--sdcpp", default=os.path.join(ROOT, "bench", "sdcpp", "build", "bin", "sd-cli"))
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    folder, ckpt, vocab = (os.path.join(a.work, n) for n in ("sd15", "sd15.safetensors", "vocab"))
    if not os.path.exists(os.path.join(vocab, "vocab.json")):
        subprocess.run([PY, os.path.join(ROOT, "tests", "sd_pipeline", "make_vocab.py"), vocab], check=True)
    if not (os.path.exists(ckpt) and os.path.exists(os.path.join(folder, "model_index.json"))):
        print("exporting the SD 1.5 folder and checkpoint (random weights; a few minutes)", flush=True)
        subprocess.run([PY, os.path.join(ROOT, "scripts", "export_sd_folder.py"), folder, "--config", "sd15",
                        "--tokenizer", vocab, "--seed", "1", "--ldm-checkpoint", ckpt], check=True)
    if not os.path.exists(a.sdcpp):
        subprocess.run(["bash", os.path.join(ROOT, "bench", "sdcpp", "build.sh")], check=True)

    rows = []
    for size in (int(s) for s in a.sizes.split(",")):
        for w in a.weights.split(","):
            o = o2g_row(a.bin, folder, size, w, a.steps, a.threads, a.work)
            s = sdcpp_row(a.sdcpp, ckpt, size, w, a.steps, a.threads, a.work)
            rows.append((size, w, o, s))
            print(f"{size} {w}: onnx2ggml-sd step {o['step']:.2f} s, total {o['total']:.1f} s, {o['rss']:.0f} MB | "
                  f"stable-diffusion.cpp step {s['step']:.2f} s, total {s['total']:.1f} s, {s['rss']:.0f} MB", flush=True)

    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True,
                         text=True).stdout.strip()
    L = ["<!-- sdcpp:begin (generated by bench/sd_pipeline.py, do not edit by hand) -->",
         f"Measured {datetime.date.today()} on {cpu}, {a.threads} threads, {a.steps} steps of euler with classifier-free "
         "guidance (7.5), batch 1, SD 1.5's architecture with random weights (the same tensors for both). Each cell: "
         "onnx2ggml-sd / stable-diffusion.cpp (ratio). Times in seconds from each program's log: UNet s/step is the mean "
         "over the steps (onnx2ggml-sd's first step includes specializing the UNet for the size: loading its weights into "
         "the backend and oneDNN's layouts; stable-diffusion.cpp loads each model before its stage, outside the step "
         "times), total = the program's own prompt-to-image time; process wall = the whole process from start to PNG "
         "(everything loaded, the number a user waits for); peak RSS of the whole process in MB.", "",
         "| size | weights | UNet s/step | text encoder s | VAE decode s | total s | process wall s | peak RSS MB |",
         "|---|---|---|---|---|---|---|---|"]

    def cell(o, s, k, fmt="{:.2f}"):
        return f"{fmt.format(o[k])} / {fmt.format(s[k])} ({o[k] / s[k]:.2f})"

    for size, w, o, s in rows:
        L.append(f"| {size}x{size} | {w} | {cell(o, s, 'step')} | {cell(o, s, 'text')} | {cell(o, s, 'decode')} | "
                 f"{cell(o, s, 'total', '{:.1f}')} | {cell(o, s, 'wall', '{:.1f}')} | {cell(o, s, 'rss', '{:.0f}')} |")
    L.append("<!-- sdcpp:end -->")
    table = "\n".join(L)
    print(table)
    if not a.no_write:
        doc = open(DOC).read()
        b, e = doc.index("<!-- sdcpp:begin"), doc.index("<!-- sdcpp:end -->") + len("<!-- sdcpp:end -->")
        with open(DOC, "w") as f:
            f.write(doc[:b] + table + doc[e:])
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
