// CartPole-v1 as a Lamarckian game server, written from docs/games.md with Node.js alone (no npm packages):
// its own physics, MessagePack and the HMAC handshake.
//   node examples/games/cartpole_server.js --secret ~/.lamarckian/game.secret [--bind 127.0.0.1:0]
// prints "serving tcp://HOST:PORT"; then: python -m lamarckian.games check tcp://HOST:PORT --secret ...
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const net = require('net');

const MAX_FRAME = 1 << 24, MAX_EPISODES = 65536, HANDSHAKE_MS = 5000, TIME_LIMIT = 500;
const arg = (name, fallback) => { const i = process.argv.indexOf(name); return i > 0 ? process.argv[i + 1] : fallback; };
const secret = Buffer.from(fs.readFileSync(arg('--secret').replace(/^~/, process.env.HOME), 'utf8').trim(), 'utf8');
const [bindHost, bindPort] = arg('--bind', '127.0.0.1:0').split(/:(?=\d+$)/);

// ---- MessagePack: what the protocol uses (nil, bool, ints, floats, str, bin, arrays, maps) ----
function encode(value, out = []) {
  if (value === null || value === undefined) out.push(Buffer.from([0xc0]));
  else if (typeof value === 'boolean') out.push(Buffer.from([value ? 0xc3 : 0xc2]));
  else if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= Number.MAX_SAFE_INTEGER) {
    const b = Buffer.alloc(9); b[0] = 0xcf; b.writeBigUInt64BE(BigInt(value), 1); out.push(b);
  } else if (typeof value === 'number' && Number.isInteger(value) && value >= -Number.MAX_SAFE_INTEGER) {
    const b = Buffer.alloc(9); b[0] = 0xd3; b.writeBigInt64BE(BigInt(value), 1); out.push(b);
  } else if (typeof value === 'number') { const b = Buffer.alloc(9); b[0] = 0xcb; b.writeDoubleBE(value, 1); out.push(b); }
  else if (typeof value === 'string') {
    const s = Buffer.from(value, 'utf8'), h = Buffer.alloc(5); h[0] = 0xdb; h.writeUInt32BE(s.length, 1); out.push(h, s);
  } else if (Buffer.isBuffer(value)) {
    const h = Buffer.alloc(5); h[0] = 0xc6; h.writeUInt32BE(value.length, 1); out.push(h, value);
  } else if (Array.isArray(value)) {
    const h = Buffer.alloc(5); h[0] = 0xdd; h.writeUInt32BE(value.length, 1); out.push(h);
    value.forEach((item) => encode(item, out));
  } else {
    const keys = Object.keys(value), h = Buffer.alloc(5); h[0] = 0xdf; h.writeUInt32BE(keys.length, 1); out.push(h);
    keys.forEach((key) => { encode(key, out); encode(value[key], out); });
  }
  return out;
}
const frame = (message) => { const body = Buffer.concat(encode(message)), h = Buffer.alloc(4); h.writeUInt32BE(body.length); return Buffer.concat([h, body]); };

function decode(buf) {
  let at = 0;
  const take = (n) => { if (at + n > buf.length) throw new Error('truncated msgpack'); at += n; return at - n; };
  const int = (big) => { if (big > BigInt(Number.MAX_SAFE_INTEGER) || big < -BigInt(Number.MAX_SAFE_INTEGER)) throw new Error('integer beyond 2^53'); return Number(big); };
  const array = (n) => Array.from({ length: n }, () => read());
  const map = (n) => { const m = {}; for (let i = 0; i < n; i++) { const k = read(); m[k] = read(); } return m; };
  function read() {
    const t = buf[take(1)];
    if (t <= 0x7f) return t;
    if (t >= 0xe0) return t - 0x100;
    if ((t & 0xf0) === 0x80) return map(t & 0x0f);
    if ((t & 0xf0) === 0x90) return array(t & 0x0f);
    if ((t & 0xe0) === 0xa0) { const n = t & 0x1f; return buf.toString('utf8', take(n), at); }
    switch (t) {
      case 0xc0: return null; case 0xc2: return false; case 0xc3: return true;
      case 0xc4: { const n = buf[take(1)]; return buf.subarray(take(n), at); }
      case 0xc5: { const n = buf.readUInt16BE(take(2)); return buf.subarray(take(n), at); }
      case 0xc6: { const n = buf.readUInt32BE(take(4)); return buf.subarray(take(n), at); }
      case 0xca: return buf.readFloatBE(take(4)); case 0xcb: return buf.readDoubleBE(take(8));
      case 0xcc: return buf[take(1)]; case 0xcd: return buf.readUInt16BE(take(2));
      case 0xce: return buf.readUInt32BE(take(4)); case 0xcf: return int(buf.readBigUInt64BE(take(8)));
      case 0xd0: return buf.readInt8(take(1)); case 0xd1: return buf.readInt16BE(take(2));
      case 0xd2: return buf.readInt32BE(take(4)); case 0xd3: return int(buf.readBigInt64BE(take(8)));
      case 0xd9: { const n = buf[take(1)]; return buf.toString('utf8', take(n), at); }
      case 0xda: { const n = buf.readUInt16BE(take(2)); return buf.toString('utf8', take(n), at); }
      case 0xdb: { const n = buf.readUInt32BE(take(4)); return buf.toString('utf8', take(n), at); }
      case 0xdc: return array(buf.readUInt16BE(take(2))); case 0xdd: return array(buf.readUInt32BE(take(4)));
      case 0xde: return map(buf.readUInt16BE(take(2))); case 0xdf: return map(buf.readUInt32BE(take(4)));
      default: throw new Error(`msgpack type 0x${t.toString(16)} is not used by the protocol`);
    }
  }
  const value = read();
  if (at !== buf.length) throw new Error('trailing bytes after the message');
  return value;
}

// ---- CartPole-v1 (gymnasium's equations, Euler steps of 20 ms) ----
function random(seed) { let s = seed >>> 0; return () => { s = (s + 0x6d2b79f5) >>> 0; let t = s; t = Math.imul(t ^ (t >>> 15), t | 1); t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296; }; }
let streamSeed = 1;
class CartPole {
  constructor(seed) {
    const draw = random(Number.isInteger(seed) ? seed : streamSeed++);
    this.state = [0, 0, 0, 0].map(() => draw() * 0.1 - 0.05);
    this.steps = 0; this.total = 0;
  }
  step(action) {
    let [x, xDot, theta, thetaDot] = this.state;
    const force = action === 1 ? 10 : -10, cos = Math.cos(theta), sin = Math.sin(theta);
    const temp = (force + 0.05 * thetaDot * thetaDot * sin) / 1.1;
    const thetaAcc = (9.8 * sin - cos * temp) / (0.5 * (4 / 3 - (0.1 * cos * cos) / 1.1));
    const xAcc = temp - (0.05 * thetaAcc * cos) / 1.1;
    x += 0.02 * xDot; xDot += 0.02 * xAcc; theta += 0.02 * thetaDot; thetaDot += 0.02 * thetaAcc;
    this.state = [x, xDot, theta, thetaDot]; this.steps += 1; this.total += 1;
    const terminated = Math.abs(x) > 2.4 || Math.abs(theta) > (12 * 2 * Math.PI) / 360;
    return { reward: 1, done: terminated || this.steps >= TIME_LIMIT, truncated: !terminated && this.steps >= TIME_LIMIT };
  }
}

const SPACES = {
  observation: { type: 'box', shape: [4], dtype: 'float32', low: [-4.8, -Infinity, -0.41887903, -Infinity], high: [4.8, Infinity, 0.41887903, Infinity] },
  action: { type: 'discrete', n: 2, start: 0 },
};
const entry = (game, step) => {
  const e = { observation: game.state, reward: step ? step.reward : 0, done: step ? step.done : false, truncated: step ? step.truncated : false };
  if (e.done) e.result = { fitness: game.total, win: null, objectives: {} };
  return e;
};

// ---- one connection: handshake, then requests, each answered at once (one at a time, in order) ----
function serve(socket) {
  socket.setNoDelay(true);
  const nonce = crypto.randomBytes(32), episodes = new Map();
  let pending = Buffer.alloc(0), authenticated = false;
  const send = (message) => socket.write(frame(message));
  const proof = (role, first, second) => crypto.createHmac('sha256', secret).update(Buffer.concat([Buffer.from(role), first, second])).digest();
  const refuse = (id, message) => { episodes.delete(id); send({ type: 'error', episode: id, message }); };
  const timer = setTimeout(() => { if (!authenticated) socket.destroy(); }, HANDSHAKE_MS);
  send({ type: 'challenge', version: 1, nonce });

  function handle(message) {
    if (!authenticated) {
      const theirs = message.nonce, expected = proof('client', nonce, Buffer.isBuffer(theirs) ? theirs : Buffer.alloc(0));
      if (message.type !== 'auth' || !Buffer.isBuffer(message.proof) || message.proof.length !== 32 || !crypto.timingSafeEqual(message.proof, expected)) {
        send({ type: 'error', message: 'authentication failed' }); return socket.end();
      }
      authenticated = true; clearTimeout(timer);
      return send({ type: 'hello', version: 1, proof: proof('server', theirs, nonce), players: [{ name: 'cartpole_0', ...SPACES }], rule: false, max_frame: MAX_FRAME, max_episodes: MAX_EPISODES });
    }
    const id = message.episode;
    if (!Number.isInteger(id)) throw new Error('a request needs an integer episode id');
    if (message.type === 'close') return episodes.delete(id);
    if (message.type === 'reset') {
      if (episodes.has(id)) return refuse(id, `episode ${id} is already running`);
      if (episodes.size >= MAX_EPISODES) return send({ type: 'error', episode: id, message: 'too many episodes' });
      if (!Array.isArray(message.seats) || message.seats.length !== 1 || message.seats[0] !== 0) return send({ type: 'error', episode: id, message: 'seats must be [0]' });
      const game = new CartPole(message.seed);
      episodes.set(id, game);
      return send({ type: 'observation', episode: id, players: [entry(game, null)] });
    }
    if (message.type !== 'step') throw new Error(`unknown message type ${message.type}`);
    const game = episodes.get(id);
    if (!game) return send({ type: 'error', episode: id, message: `no episode ${id} runs on this connection` });
    const action = Array.isArray(message.actions) && message.actions.length === 1 ? message.actions[0] : undefined;
    if (action !== 0 && action !== 1) return refuse(id, 'actions must be [0] or [1]');
    const step = game.step(action);
    if (step.done) episodes.delete(id);
    send({ type: 'observation', episode: id, players: [entry(game, step)] });
  }

  socket.on('data', (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    try {
      while (pending.length >= 4) {
        const length = pending.readUInt32BE(0);
        if (length > MAX_FRAME) throw new Error(`a frame of ${length} bytes is over max_frame`);
        if (pending.length < 4 + length) break;
        if (socket.writableEnded) return;
        const message = decode(pending.subarray(4, 4 + length));
        pending = pending.subarray(4 + length);
        if (message === null || typeof message !== 'object' || typeof message.type !== 'string') throw new Error('a message is a map with a type');
        handle(message);
      }
    } catch (error) { send({ type: 'error', message: String(error.message) }); socket.end(); socket.destroy(); }
  });
  socket.on('error', () => socket.destroy());
  socket.on('close', () => { clearTimeout(timer); episodes.clear(); });
}

const server = net.createServer(serve);
server.listen(Number(bindPort), bindHost, () => {
  const { address, port } = server.address();
  console.log(`serving tcp://${address.includes(':') ? `[${address}]` : address}:${port}`);
});
process.on('SIGTERM', () => process.exit(0));
