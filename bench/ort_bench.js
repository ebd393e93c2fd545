// Times ONNX Runtime (onnxruntime-node, CPU) on one model: loads the session once, runs
// warmup + repeat iterations, prints `median_ms=... min_ms=... peak_rss_mb=... times_ms=...`.
// usage: node ort_bench.js MODEL NAME=INPUT.npy[,NAME=INPUT.npy...] THREADS WARMUP REPEAT
//    or: node ort_bench.js --sequence MODEL THREADS SET [SET...]   (SET: NAME=INPUT.npy[,...])
//        runs the sets once each, in order, in one session, and prints `set K: ms=...` per run
//        (bench/first_run.py: the first run of a new input shape against the runs after it)
const fs = require('fs');
const ort = require('onnxruntime-node');

function readNpy(path) {
  const b = fs.readFileSync(path);
  const hlen = b.readUInt16LE(8);
  const header = b.slice(10, 10 + hlen).toString('latin1');
  const shape = header.match(/\(([^)]*)\)/)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const raw = b.buffer.slice(b.byteOffset + 10 + hlen, b.byteOffset + b.length);
  if (header.includes("'<f4'")) return new ort.Tensor('float32', new Float32Array(raw), shape);
  if (header.includes("'<i8'")) return new ort.Tensor('int64', new BigInt64Array(raw), shape);
  throw new Error(path + ': only float32 and int64 .npy inputs');
}

function readFeeds(inputs) {
  const feeds = {};
  for (const kv of inputs.split(',')) {
    const i = kv.indexOf('=');
    feeds[kv.slice(0, i)] = readNpy(kv.slice(i + 1));
  }
  return feeds;
}

function openSession(model, threads) {
  return ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, graphOptimizationLevel: 'all',
    executionProviders: ['cpu'],
  });
}

async function sequence([model, threads, ...sets]) {
  const sess = await openSession(model, threads);
  const feeds = sets.map(readFeeds);  // read before timing
  for (let k = 0; k < feeds.length; k++) {
    const t0 = process.hrtime.bigint();
    await sess.run(feeds[k]);
    console.log(`set ${k}: ms=${(Number(process.hrtime.bigint() - t0) / 1e6).toFixed(3)}`);
  }
}

(async () => {
  if (process.argv[2] === '--sequence') return sequence(process.argv.slice(3));
  const [model, inputs, threads, warmup, repeat] = process.argv.slice(2);
  const sess = await openSession(model, threads);
  const feeds = readFeeds(inputs);
  for (let i = 0; i < Number(warmup); i++) await sess.run(feeds);
  const ms = [];
  for (let i = 0; i < Number(repeat); i++) {
    const t0 = process.hrtime.bigint();
    await sess.run(feeds);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  ms.sort((a, b) => a - b);
  const n = ms.length, med = n % 2 ? ms[(n - 1) / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  const rss = process.resourceUsage().maxRSS / 1024;
  console.log(`median_ms=${med.toFixed(3)} min_ms=${ms[0].toFixed(3)} peak_rss_mb=${rss.toFixed(1)} times_ms=${ms.map(t => t.toFixed(3)).join(',')}`);
})().catch(e => { console.error(e); process.exit(1); });
