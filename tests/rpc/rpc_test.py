#!/usr/bin/env python3
"""ggml RPC (issue 15 item 4): two `onnx2ggml rpc-server` processes on 127.0.0.1, and models run with
`--backend rpc:127.0.0.1:A,rpc:127.0.0.1:B`: the weights cut into two runs of layers, one per server
(o2g_runtime::place_weights), each server computing its layers. Checks:
- resnet50 and the SD 1.5 VAE decoder against PyTorch (1e-4 of max|ref|, the CPU's tolerance: the servers
  compute on ggml's CPU backend), and that both servers computed nodes (`run --profile`, resnet50);
- the compiled program of tinycnn with the same --backend: bit-identical to `run`;
- errors: an unreachable server, a malformed endpoint, a server killed mid-run: exit 2 within a timeout, no hang.

usage: rpc_test.py ONNX2GGML MODEL_DIR SD_DIR WORK     (exit 77: this build has no ggml RPC)
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from check_model import input_args  # noqa: E402

TOL = 1e-4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(bin_, port):
    p = subprocess.Popen([bin_, "rpc-server", "--port", str(port), "--threads", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(100):  # until it listens
        if p.poll() is not None:
            out, err = p.communicate()
            if "no ggml RPC" in err:
                print("this build has no ggml RPC (-DGGML_RPC=ON): skipped")
                sys.exit(77)
            sys.exit(f"rpc-server on port {port} exited {p.returncode}: {err}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p
        except OSError:
            time.sleep(0.1)
    sys.exit(f"rpc-server on port {port} does not listen")


def run(cmd, timeout=600):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def check_model(bin_, model_dir, backend, out, profile):
    cmd = [bin_, "run", os.path.join(model_dir, "model.onnx"), *input_args(model_dir), "--backend", backend,
           "--output-dir", out] + (["--profile"] if profile else [])
    rc, log = run(cmd)
    assert rc == 0, f"run failed ({rc}):\n{log[-3000:]}"
    got = np.load(os.path.join(out, "output_0.npy"))
    ref = np.load(os.path.join(model_dir, "expected.npy"))
    err = float(np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max())
    print(f"{os.path.basename(model_dir)} on two RPC servers vs PyTorch: max error / max |ref| = {err:.3g} (tolerance {TOL})")
    assert err <= TOL
    return log, got


def main():
    bin_, model_dir, sd_dir, work = sys.argv[1:5]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ports = [free_port(), free_port()]
    servers = [start_server(bin_, p) for p in ports]
    try:
        backend = ",".join(f"rpc:127.0.0.1:{p}" for p in ports)
        log, _ = check_model(bin_, os.path.join(model_dir, "resnet50"), backend, os.path.join(work, "r50"), True)
        for p in ports:  # `--profile`'s per-backend lines: both servers computed nodes
            line = next((l for l in log.splitlines() if f"127.0.0.1:{p}]" in l and "nodes" in l), None)
            assert line, f"server {p} computed nothing:\n{log}"
            print("  " + line.strip())
        check_model(bin_, os.path.join(sd_dir, "vae_decoder"), backend, os.path.join(work, "vae"), False)

        # the compiled program, same --backend: bit-identical to run
        tiny = os.path.join(model_dir, "tinycnn")
        _, got = check_model(bin_, tiny, backend, os.path.join(work, "tiny"), False)
        gen = os.path.join(work, "gen")
        rc, log = run([bin_, "compile", os.path.join(tiny, "model.onnx"), "-o", gen])
        assert rc == 0, log
        cfg = ["cmake", "-S", gen, "-B", os.path.join(gen, "build"), "-DCMAKE_BUILD_TYPE=Release", "-DGGML_RPC=ON"]
        env = dict(os.environ)
        if shutil.which("ccache"):
            cfg += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
            env.setdefault("CCACHE_DIR", os.path.join(os.path.dirname(os.path.abspath(work)), "ccache"))
            env.setdefault("CCACHE_NOHASHDIR", "1")
        for c in (cfg, ["cmake", "--build", os.path.join(gen, "build"), "-j", str(os.cpu_count() or 2)]):
            r = subprocess.run(c, capture_output=True, text=True, env=env)
            assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        comp = os.path.join(work, "compiled")
        rc, log = run([os.path.join(gen, "build", "model"), *input_args(tiny), "--backend", backend, "--output-dir", comp])
        assert rc == 0, log
        same = np.array_equal(np.load(os.path.join(comp, "output_0.npy")).view(np.uint32), got.view(np.uint32))
        print(f"compiled tinycnn on the two servers vs run: {'bit-identical' if same else 'DIFFERENT'}")
        assert same

        # errors: exit 2, quickly, with the reason
        r50 = [bin_, "run", os.path.join(model_dir, "resnet50", "model.onnx"), *input_args(os.path.join(model_dir, "resnet50"))]
        for bad, want in ((f"rpc:127.0.0.1:{free_port()}", "not reachable"), ("rpc:127.0.0.1", "HOST:PORT"),
                          (backend + ",cpu", "expected rpc:HOST:PORT")):
            t0 = time.time()
            rc, log = run(r50 + ["--backend", bad], timeout=60)
            print(f"--backend {bad}: exit {rc} in {time.time() - t0:.1f} s: {log.strip().splitlines()[-1]}")
            assert rc == 2 and want in log, log
        # a server killed mid-run
        victim_port = free_port()
        victim = start_server(bin_, victim_port)
        bench = subprocess.Popen([bin_, "bench", os.path.join(model_dir, "resnet50", "model.onnx"), "--random-inputs", "1",
                                  "--repeat", "100000", "--backend", f"rpc:127.0.0.1:{victim_port}"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        t0 = time.time()
        try:
            out, err = bench.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            bench.kill()
            sys.exit("a run whose RPC server died hangs")
        print(f"server killed mid-run: exit {bench.returncode} after {time.time() - t0:.1f} s: {err.strip().splitlines()[-1]}")
        assert bench.returncode == 2 and "RPC" in err, err
    finally:
        for s in servers:
            s.kill()
            s.wait()
    shutil.rmtree(work, ignore_errors=True)
    print("rpc: ok")


if __name__ == "__main__":
    main()
