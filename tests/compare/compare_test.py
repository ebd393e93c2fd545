"""`onnx2ggml compare` (issue 21): a clean model reports no divergence; an error planted in one node's
lowering (ONNX2GGML_TEST_PERTURB_NODE, test only: that node's float outputs scaled by 1.01) is found at
exactly that node with --reference host, --reference ort and a folder of .npy files from PyTorch; a fused
block (GELU fused by the optimizer) is reported under the ONNX value it stands for, and --disable-pass
shows the unfused nodes. usage: compare_test.py BIN WORKDIR host|ort
(host: --reference host and the PyTorch folder; ort: --reference ort, exit 77 = skipped when
onnxruntime-node is not installed: scripts/setup.sh --bench)"""
import json, os, subprocess, sys
import numpy as np
import torch
import torch.nn as nn

BIN, WORK = sys.argv[1], sys.argv[2]
ORT = sys.argv[3] == "ort"
if ORT and not os.path.isdir(os.path.join(os.path.dirname(__file__), "..", "..", "bench", "node_modules", "onnxruntime-node")) \
        and not os.environ.get("NODE_PATH"):
    print("skipped: onnxruntime-node is not installed (scripts/setup.sh --bench)")
    sys.exit(77)
os.makedirs(WORK, exist_ok=True)
torch.manual_seed(0)


class MLP(nn.Module):  # MatMul + Add (3-D input), GELU, Softmax: every node has a host evaluator
    def __init__(s):
        super().__init__()
        s.fc1, s.fc2 = nn.Linear(16, 32), nn.Linear(32, 8)

    def forward(s, x):
        return torch.softmax(s.fc2(torch.nn.functional.gelu(s.fc1(x))), -1)


class CNN(nn.Module):  # conv + bias + relu written in place by the oneDNN backend, then Gemm
    def __init__(s):
        super().__init__()
        s.conv, s.fc = nn.Conv2d(3, 8, 3, padding=1), nn.Linear(8 * 8 * 8, 10)

    def forward(s, x):
        return s.fc(torch.relu(s.conv(x)).flatten(1))


class Wide(nn.Module):  # the ops whose host evaluators came last: InstanceNorm, PRelu, Resize, LayerNorm, Gemm
    def __init__(s):
        super().__init__()
        s.conv, s.inorm, s.prelu = nn.Conv2d(3, 8, 3, padding=1), nn.InstanceNorm2d(8, affine=True), nn.PReLU(8)
        s.ln, s.fc = nn.LayerNorm(8), nn.Linear(8, 5)

    def forward(s, x):
        y = nn.functional.interpolate(s.prelu(s.inorm(s.conv(x))), scale_factor=2, mode="bilinear", align_corners=False)
        return s.fc(s.ln(nn.functional.adaptive_max_pool2d(y, 1).flatten(1)))


def export(m, shape, name):
    path = os.path.join(WORK, name + ".onnx")
    x = torch.randn(*shape)
    torch.onnx.export(m.eval(), x, path, opset_version=17, input_names=["x"], output_names=["y"])
    np.save(os.path.join(WORK, name + "_x.npy"), x.numpy())
    return path, x


fails = 0


def compare(model, extra, env_node=None, want_rc=0):
    global fails
    env = dict(os.environ)
    env.pop("ONNX2GGML_TEST_PERTURB_NODE", None)
    if env_node:
        env["ONNX2GGML_TEST_PERTURB_NODE"] = env_node
    x = model[:-5] + "_x.npy"
    p = subprocess.run([BIN, "compare", model, "--input", "x=" + x, "--json", *extra], env=env, capture_output=True, text=True)
    if p.returncode != want_rc:
        print(f"FAIL: compare {os.path.basename(model)} {extra} perturb={env_node}: exit {p.returncode} (want {want_rc})\n{p.stdout}{p.stderr}")
        fails += 1
        return None
    return json.loads(p.stdout)


def expect(cond, what, res=None):
    global fails
    if cond:
        print("ok:", what)
    else:
        fails += 1
        print("FAIL:", what)
        if res:
            print(json.dumps(res, indent=1)[:3000])


MLP_M = MLP().eval()
mlp, mx = export(MLP_M, (1, 4, 16), "mlp")
cnn, cx = export(CNN(), (1, 3, 8, 8), "cnn")
wide, wx = export(Wide(), (1, 3, 8, 8), "wide")
refs = ["ort"] if ORT else ["host"]

# PyTorch's values as a reference folder: the graph output and the first Linear's output (the MatMul+Add
# value /fc1/Add_output_0), files named as value_file_name escapes them
tdir = os.path.join(WORK, "torch_ref")
os.makedirs(tdir, exist_ok=True)
if not ORT:
    refs.append(tdir)
with torch.no_grad():
    np.save(os.path.join(tdir, "y.npy"), MLP_M(mx).numpy())
    np.save(os.path.join(tdir, "%2Ffc1%2FAdd_output_0.npy"), MLP_M.fc1(mx).numpy())

for ref in refs:
    r = compare(mlp, ["--reference", ref])
    if r:
        compared = [w for w in r["rows"] if "rel_err" in w]
        expect(r["first_divergence"] is None and len(compared) >= (2 if ref == tdir else 4) and all(w["rel_err"] <= 1e-4 for w in compared),
               f"mlp --reference {ref}: no divergence, {len(compared)} values compared", r)
        gelu = [w for w in r["rows"] if w["op"] == "onnx2ggml.Gelu"]
        expect(ref == tdir or (len(gelu) == 1 and "rel_err" in gelu[0] and "GELU" in gelu[0]["ggml"]),
               f"mlp --reference {ref}: the fused GELU is compared under its ONNX value ({gelu[0]['value'] if gelu else '-'})", r)
    if ref == tdir:  # two values only: the planted error shows at the first of them
        r = compare(mlp, ["--reference", ref], env_node="/fc1/Add", want_rc=1)
        if r:
            expect(r["first_divergence"] == "/fc1/Add", "mlp --reference torch folder: the planted error is found at /fc1/Add", r)
        continue
    r = compare(mlp, ["--reference", ref], env_node="/fc1/MatMul", want_rc=1)
    if r:
        expect(r["first_divergence"] == "/fc1/MatMul", f"mlp --reference {ref}: the planted error is found at /fc1/MatMul", r)
    r = compare(mlp, ["--reference", ref], env_node="/Softmax", want_rc=1)
    if r:
        expect(r["first_divergence"] == "/Softmax", f"mlp --reference {ref}: the planted error at the last node is found there", r)
    r = compare(mlp, ["--reference", ref, "--disable-pass", "fuse_gelu"])
    if r:
        expect(not any(w["op"] == "onnx2ggml.Gelu" for w in r["rows"]) and any(w["op"] == "Erf" for w in r["rows"]),
               f"mlp --reference {ref} --disable-pass fuse_gelu: the unfused nodes are listed", r)

# every value of Wide computed by the reference (none left unknown), and a planted error found at each node
r = compare(wide, ["--reference", refs[0], "--no-inplace"])
if r:
    unknown = [w["node"] for w in r["rows"] if "rel_err" not in w]
    expect(r["first_divergence"] is None and not unknown, f"wide --reference {refs[0]}: every value compared ({unknown}), no divergence", r)
    for node in [w["node"] for w in r["rows"] if w["op"] in ("InstanceNormalization", "PRelu", "Resize", "MaxPool", "LayerNormalization", "Gemm")]:
        p = compare(wide, ["--reference", refs[0], "--no-inplace"], env_node=node, want_rc=1)
        if p:
            expect(p["first_divergence"] == node, f"wide --reference {refs[0]}: the planted error is found at {node}", p)

if ORT:  # Gemm and Conv: ORT as the reference
    r = compare(cnn, ["--reference", "ort"])
    if r:
        expect(r["first_divergence"] is None, "cnn --reference ort: no divergence", r)
        conv = [w for w in r["rows"] if w["op"] == "Conv"]
        expect(len(conv) == 1 and ("rel_err" in conv[0] or "in place" in conv[0].get("note", "")),
               "cnn: the convolution is compared or marked as overwritten in place", r)
    r = compare(cnn, ["--reference", "ort", "--no-inplace"])
    if r:
        expect(all("rel_err" in w for w in r["rows"]), "cnn --no-inplace: every value compared (no in-place writes across nodes)", r)
    r = compare(cnn, ["--reference", "ort", "--no-inplace"], env_node="/conv/Conv", want_rc=1)
    if r:
        expect(r["first_divergence"] == "/conv/Conv", "cnn --no-inplace: the planted error in the convolution is found there", r)
    r = compare(cnn, ["--reference", "ort"], env_node="/fc/Gemm", want_rc=1)
    if r:
        expect(r["first_divergence"] == "/fc/Gemm", "cnn --reference ort: the planted error is found at /fc/Gemm", r)

if not ORT:  # pictures: inspect --svg (by backend), compare --svg (by error); one rendered to PNG
    svg, png, csvg = (os.path.join(WORK, f) for f in ("cnn.svg", "cnn.png", "mlp_compare.svg"))
    p = subprocess.run([BIN, "inspect", cnn, "--svg", svg], capture_output=True, text=True)
    expect(p.returncode == 0 and os.path.exists(svg), "inspect --svg writes the picture")
    p = subprocess.run(["rsvg-convert", svg, "-o", png], capture_output=True, text=True)
    ok = p.returncode == 0 and os.path.exists(png) and os.path.getsize(png) > 2000
    if ok:  # PNG header: width and height, big-endian at bytes 16..24
        b = open(png, "rb").read(24)
        w, h = int.from_bytes(b[16:20], "big"), int.from_bytes(b[20:24], "big")
        ok = b[:8] == b"\x89PNG\r\n\x1a\n" and 50 <= w <= 20000 and 100 <= h <= 20000
    expect(ok, "the SVG renders to a PNG of sane size")
    svgtext = open(svg).read() if os.path.exists(svg) else ""
    expect("Conv" in svgtext and "Gemm" in svgtext and "[1,8,8,8]" in svgtext, "the picture names the ops and shapes on the edges")
    env = dict(os.environ, ONNX2GGML_TEST_PERTURB_NODE="/fc1/MatMul")
    p = subprocess.run([BIN, "compare", mlp, "--input", "x=" + mlp[:-5] + "_x.npy", "--svg", csvg], env=env, capture_output=True, text=True)
    expect(p.returncode == 1 and os.path.exists(csvg) and "#de2d26" in open(csvg).read(), "compare --svg marks the first divergence")

print("compare_test: all passed" if fails == 0 else f"compare_test: {fails} failed")
sys.exit(1 if fails else 0)
