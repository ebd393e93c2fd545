// Runs ONNX backend test cases through ONNX Runtime (onnxruntime-node, CPU) for the conformance
// report's reference column. Reads a manifest (JSON list of {model, sets: [{inputs: {name: file.npy},
// outdir}], options?: {session options, e.g. graphOptimizationLevel}}) written by ort_reference.py
// (or tests/quant/quant_ort_test.py); writes each output as OUTDIR/output_K.npy (strings as
// OUTDIR/output_K.json) or OUTDIR/error.txt.
// usage: node ort_run.js MANIFEST.json   (NODE_PATH must reach onnxruntime-node)
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const NPY = {  // numpy descr -> [ORT type, typed array]
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<f2': ['float16', Uint16Array],
  '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array], '<i2': ['int16', Int16Array], '|i1': ['int8', Int8Array],
  '<u8': ['uint64', BigUint64Array], '<u4': ['uint32', Uint32Array], '<u2': ['uint16', Uint16Array], '|u1': ['uint8', Uint8Array],
  '|b1': ['bool', Uint8Array],
};

function readNpy(file) {
  const b = fs.readFileSync(file);
  const major = b[6];
  const hlen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = b.slice(start, start + hlen).toString('latin1');
  const descr = header.match(/'descr': '([^']*)'/)[1];
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const data = b.slice(start + hlen);
  const raw = data.buffer.slice(data.byteOffset, data.byteOffset + data.length);
  const u = descr.match(/^<U(\d+)$/);
  if (u) {  // numpy strings: UTF-32 code points, NUL padded
    const w = Number(u[1]), cps = new Uint32Array(raw), out = [];
    for (let i = 0; i < cps.length / w; i++) {
      let s = '';
      for (let k = 0; k < w && cps[i * w + k]; k++) s += String.fromCodePoint(cps[i * w + k]);
      out.push(s);
    }
    return new ort.Tensor('string', out, shape);
  }
  if (!NPY[descr]) throw new Error(`${file}: dtype ${descr}`);
  const [type, Arr] = NPY[descr];
  const arr = new Arr(raw);
  return new ort.Tensor(type, type === 'bool' ? Uint8Array.from(arr, x => x ? 1 : 0) : arr, shape);
}

function writeNpy(file, t) {
  const entry = Object.entries(NPY).find(([, [type]]) => type === t.type);
  if (!entry) throw new Error(`output of type ${t.type}`);
  const dims = t.dims.length === 1 ? `${t.dims[0]},` : t.dims.join(', ');
  let h = `{'descr': '${entry[0]}', 'fortran_order': False, 'shape': (${dims}), }`;
  h += ' '.repeat((64 - ((10 + h.length + 1) % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  Buffer.from('\x93NUMPY\x01\x00', 'latin1').copy(head);
  head.writeUInt16LE(h.length, 8);
  const d = t.data;
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(h, 'latin1'), Buffer.from(d.buffer, d.byteOffset, d.byteLength)]));
}

(async () => {
  const jobs = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  for (const job of jobs) {
    for (const set of job.sets) {
      fs.mkdirSync(set.outdir, { recursive: true });
      try {
        const opts = { intraOpNumThreads: 1, interOpNumThreads: 1, executionProviders: ['cpu'], ...(job.options || {}) };
        const sess = await ort.InferenceSession.create(job.model, opts);
        const feeds = {};
        for (const [name, file] of Object.entries(set.inputs)) feeds[name] = readNpy(file);
        const out = await sess.run(feeds);
        sess.outputNames.forEach((name, k) => {
          const t = out[name];
          if (t.type === 'string') fs.writeFileSync(path.join(set.outdir, `output_${k}.json`), JSON.stringify({ dims: t.dims, data: t.data }));
          else writeNpy(path.join(set.outdir, `output_${k}.npy`), t);
        });
        if (sess.release) await sess.release();
      } catch (e) {
        fs.writeFileSync(path.join(set.outdir, 'error.txt'), String(e && e.message ? e.message : e).split('\n')[0]);
      }
    }
  }
})().catch(e => { console.error(e); process.exit(1); });
