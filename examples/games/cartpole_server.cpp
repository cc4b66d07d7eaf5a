// CartPole-v1 as a Lamarckian game server, written from docs/games.md in C++17 with the standard library and POSIX
// sockets only: its own physics, MessagePack, SHA-256 and HMAC.
//   g++ -O2 -std=c++17 -o cartpole_server examples/games/cartpole_server.cpp
//   ./cartpole_server --secret ~/.lamarckian/game.secret [--bind 127.0.0.1:0]    # prints "serving tcp://HOST:PORT"
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <unistd.h>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>
using namespace std;
using Bytes = string;
const uint32_t MAX_FRAME = 1u << 24;
const int MAX_EPISODES = 65536, TIME_LIMIT = 500;

// ---- SHA-256 and HMAC (FIPS 180-4, RFC 2104) ----
Bytes sha256(const Bytes& data) {
  static const uint32_t K[64] = {0x428a2f98,0x71374491,0xb5c0fbcf,0xe9b5dba5,0x3956c25b,0x59f111f1,0x923f82a4,0xab1c5ed5,0xd807aa98,0x12835b01,0x243185be,0x550c7dc3,0x72be5d74,0x80deb1fe,0x9bdc06a7,0xc19bf174,0xe49b69c1,0xefbe4786,0x0fc19dc6,0x240ca1cc,0x2de92c6f,0x4a7484aa,0x5cb0a9dc,0x76f988da,0x983e5152,0xa831c66d,0xb00327c8,0xbf597fc7,0xc6e00bf3,0xd5a79147,0x06ca6351,0x14292967,0x27b70a85,0x2e1b2138,0x4d2c6dfc,0x53380d13,0x650a7354,0x766a0abb,0x81c2c92e,0x92722c85,0xa2bfe8a1,0xa81a664b,0xc24b8b70,0xc76c51a3,0xd192e819,0xd6990624,0xf40e3585,0x106aa070,0x19a4c116,0x1e376c08,0x2748774c,0x34b0bcb5,0x391c0cb3,0x4ed8aa4a,0x5b9cca4f,0x682e6ff3,0x748f82ee,0x78a5636f,0x84c87814,0x8cc70208,0x90befffa,0xa4506ceb,0xbef9a3f7,0xc67178f2};
  uint32_t h[8] = {0x6a09e667,0xbb67ae85,0x3c6ef372,0xa54ff53a,0x510e527f,0x9b05688c,0x1f83d9ab,0x5be0cd19};
  Bytes m = data + '\x80';
  while (m.size() % 64 != 56) m += '\0';
  for (int i = 7; i >= 0; i--) m += char((uint64_t(data.size()) * 8) >> (8 * i));
  auto rot = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
  for (size_t off = 0; off < m.size(); off += 64) {
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++) w[i] = uint32_t(uint8_t(m[off + 4 * i])) << 24 | uint32_t(uint8_t(m[off + 4 * i + 1])) << 16 | uint32_t(uint8_t(m[off + 4 * i + 2])) << 8 | uint8_t(m[off + 4 * i + 3]);
    for (int i = 16; i < 64; i++) w[i] = w[i - 16] + (rot(w[i - 15], 7) ^ rot(w[i - 15], 18) ^ (w[i - 15] >> 3)) + w[i - 7] + (rot(w[i - 2], 17) ^ rot(w[i - 2], 19) ^ (w[i - 2] >> 10));
    memcpy(v, h, sizeof v);
    for (int i = 0; i < 64; i++) {
      uint32_t t1 = v[7] + (rot(v[4], 6) ^ rot(v[4], 11) ^ rot(v[4], 25)) + ((v[4] & v[5]) ^ (~v[4] & v[6])) + K[i] + w[i];
      uint32_t t2 = (rot(v[0], 2) ^ rot(v[0], 13) ^ rot(v[0], 22)) + ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
      memmove(v + 1, v, 7 * sizeof(uint32_t)); v[4] += t1; v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) h[i] += v[i];
  }
  Bytes out;
  for (uint32_t x : h) for (int i = 3; i >= 0; i--) out += char(x >> (8 * i));
  return out;
}
Bytes hmac(Bytes key, const Bytes& data) {
  if (key.size() > 64) key = sha256(key);
  key.resize(64, '\0');
  Bytes inner(64, 0), outer(64, 0);
  for (int i = 0; i < 64; i++) { inner[i] = key[i] ^ 0x36; outer[i] = key[i] ^ 0x5c; }
  return sha256(outer + sha256(inner + data));
}

// ---- MessagePack: the subset the protocol uses ----
struct V {
  enum T { NIL, BOOL, INT, FLT, STR, BIN, ARR, MAP } t = NIL;
  bool b = false; int64_t i = 0; double f = 0; Bytes s; vector<V> a; vector<pair<Bytes, V>> m;
  const V& operator[](const string& key) const { static V nil; for (auto& kv : m) if (kv.first == key) return kv.second; return nil; }
};
struct Decoder {
  const Bytes& buf; size_t at = 0;
  uint64_t be(int n) { if (at + n > buf.size()) throw runtime_error("truncated msgpack"); uint64_t x = 0; for (int k = 0; k < n; k++) x = x << 8 | uint8_t(buf[at++]); return x; }
  Bytes raw(size_t n) { if (at + n > buf.size()) throw runtime_error("truncated msgpack"); at += n; return buf.substr(at - n, n); }
  V num(int64_t x) { V v; v.t = V::INT; v.i = x; return v; }
  V str(size_t n, V::T t) { V v; v.t = t; v.s = raw(n); return v; }
  V arr(size_t n) { V v; v.t = V::ARR; for (size_t k = 0; k < n; k++) v.a.push_back(read()); return v; }
  V map(size_t n) { V v; v.t = V::MAP; for (size_t k = 0; k < n; k++) { V key = read(); if (key.t != V::STR) throw runtime_error("map keys are strings"); V value = read(); v.m.push_back({key.s, value}); } return v; }
  V read() {
    uint8_t t = be(1); V v;
    if (t <= 0x7f) return num(t);
    if (t >= 0xe0) return num(int8_t(t));
    if ((t & 0xf0) == 0x80) return map(t & 0x0f);
    if ((t & 0xf0) == 0x90) return arr(t & 0x0f);
    if ((t & 0xe0) == 0xa0) return str(t & 0x1f, V::STR);
    switch (t) {
      case 0xc0: return v;
      case 0xc2: case 0xc3: v.t = V::BOOL; v.b = t == 0xc3; return v;
      case 0xc4: return str(be(1), V::BIN); case 0xc5: return str(be(2), V::BIN); case 0xc6: return str(be(4), V::BIN);
      case 0xca: { uint32_t x = be(4); float g; memcpy(&g, &x, 4); v.t = V::FLT; v.f = g; return v; }
      case 0xcb: { uint64_t x = be(8); v.t = V::FLT; memcpy(&v.f, &x, 8); return v; }
      case 0xcc: return num(be(1)); case 0xcd: return num(be(2)); case 0xce: return num(be(4));
      case 0xcf: { uint64_t x = be(8); if (x > (1ull << 63) - 1) throw runtime_error("integer too large"); return num(int64_t(x)); }
      case 0xd0: return num(int8_t(be(1))); case 0xd1: return num(int16_t(be(2)));
      case 0xd2: return num(int32_t(be(4))); case 0xd3: return num(int64_t(be(8)));
      case 0xd9: return str(be(1), V::STR); case 0xda: return str(be(2), V::STR); case 0xdb: return str(be(4), V::STR);
      case 0xdc: return arr(be(2)); case 0xdd: return arr(be(4)); case 0xde: return map(be(2)); case 0xdf: return map(be(4));
    }
    throw runtime_error("a msgpack type the protocol does not use");
  }
};
struct Out {  // a frame under construction: a msgpack body, then the length prefix
  Bytes b;
  Out& be(uint8_t tag, uint64_t x, int n) { b += char(tag); for (int k = n - 1; k >= 0; k--) b += char(x >> (8 * k)); return *this; }
  Out& nil() { b += char(0xc0); return *this; }
  Out& boolean(bool x) { b += char(x ? 0xc3 : 0xc2); return *this; }
  Out& integer(int64_t x) { return be(0xd3, uint64_t(x), 8); }
  Out& real(double x) { uint64_t u; memcpy(&u, &x, 8); return be(0xcb, u, 8); }
  Out& str(const Bytes& s) { be(0xdb, s.size(), 4); b += s; return *this; }
  Out& bin(const Bytes& s) { be(0xc6, s.size(), 4); b += s; return *this; }
  Out& arr(uint32_t n) { return be(0xdd, n, 4); }
  Out& map(uint32_t n) { return be(0xdf, n, 4); }
  Out& key(const char* k) { return str(k); }
  Bytes frame() const { Out h; h.b = ""; for (int k = 3; k >= 0; k--) h.b += char(b.size() >> (8 * k)); return h.b + b; }
};

// ---- CartPole-v1 (gymnasium's equations, Euler steps of 20 ms) ----
struct CartPole {
  double s[4]; int steps = 0; double total = 0;
  explicit CartPole(uint64_t seed) { mt19937_64 g(seed); uniform_real_distribution<double> u(-0.05, 0.05); for (double& x : s) x = u(g); }
  void step(int action, bool& done, bool& truncated) {
    double force = action == 1 ? 10 : -10, c = cos(s[2]), sn = sin(s[2]);
    double temp = (force + 0.05 * s[3] * s[3] * sn) / 1.1;
    double thetaAcc = (9.8 * sn - c * temp) / (0.5 * (4.0 / 3 - 0.1 * c * c / 1.1)), xAcc = temp - 0.05 * thetaAcc * c / 1.1;
    s[0] += 0.02 * s[1]; s[1] += 0.02 * xAcc; s[2] += 0.02 * s[3]; s[3] += 0.02 * thetaAcc;
    steps++; total += 1;
    bool terminated = fabs(s[0]) > 2.4 || fabs(s[2]) > 12 * 2 * M_PI / 360;
    done = terminated || steps >= TIME_LIMIT; truncated = !terminated && steps >= TIME_LIMIT;
  }
};
void observation(Out& o, int64_t id, const CartPole& g, bool stepped, bool done, bool truncated) {
  o.map(3).key("type").str("observation").key("episode").integer(id).key("players").arr(1).map(done ? 5 : 4);
  o.key("observation").arr(4); for (double x : g.s) o.real(x);
  o.key("reward").real(stepped ? 1 : 0).key("done").boolean(done).key("truncated").boolean(truncated);
  if (done) o.key("result").map(3).key("fitness").real(g.total).key("win").nil().key("objectives").map(0);
}
void space(Out& o) {
  const double inf = INFINITY, low[4] = {-4.8, -inf, -0.41887903, -inf};
  o.key("observation").map(5).key("type").str("box").key("shape").arr(1).integer(4).key("dtype").str("float32");
  o.key("low").arr(4); for (double x : low) o.real(x);
  o.key("high").arr(4); for (double x : low) o.real(-x);
  o.key("action").map(3).key("type").str("discrete").key("n").integer(2).key("start").integer(0);
}

// ---- connections: handshake, then each request answered at once, in order ----
struct Client { int fd; Bytes in, nonce; bool authenticated = false; chrono::steady_clock::time_point deadline; map<int64_t, CartPole> episodes; };
Bytes secret;
uint64_t stream_seed = 1;
void send_all(int fd, const Bytes& data) { for (size_t at = 0; at < data.size();) { ssize_t n = send(fd, data.data() + at, data.size() - at, MSG_NOSIGNAL); if (n <= 0) throw runtime_error("send failed"); at += n; } }
void error(Client& c, int64_t id, const Bytes& why, bool has_id = true) {
  Out o; o.map(has_id ? 3 : 2).key("type").str("error").key("message").str(why); if (has_id) o.key("episode").integer(id);
  send_all(c.fd, o.frame());
}
void handle(Client& c, const V& m) {
  if (!c.authenticated) {
    const V& theirs = m["nonce"];
    if (m["type"].s != "auth" || theirs.t != V::BIN || m["proof"].s != hmac(secret, "client" + c.nonce + theirs.s)) { error(c, 0, "authentication failed", false); throw runtime_error("refused"); }
    c.authenticated = true;
    Out o; o.map(7).key("type").str("hello").key("version").integer(1).key("proof").bin(hmac(secret, "server" + theirs.s + c.nonce));
    o.key("players").arr(1).map(3).key("name").str("cartpole_0"); space(o);
    o.key("rule").boolean(false).key("max_frame").integer(MAX_FRAME).key("max_episodes").integer(MAX_EPISODES);
    return send_all(c.fd, o.frame());
  }
  if (m["episode"].t != V::INT) throw runtime_error("a request needs an integer episode id");
  int64_t id = m["episode"].i; const Bytes& type = m["type"].s; auto found = c.episodes.find(id);
  if (type == "close") { c.episodes.erase(id); return; }
  if (type == "reset") {
    if (found != c.episodes.end()) { c.episodes.erase(found); return error(c, id, "episode already running"); }
    if (c.episodes.size() >= size_t(MAX_EPISODES)) return error(c, id, "too many episodes");
    const V& seats = m["seats"];
    if (seats.t != V::ARR || seats.a.size() != 1 || seats.a[0].t != V::INT || seats.a[0].i != 0) return error(c, id, "seats must be [0]");
    CartPole& g = c.episodes.emplace(id, CartPole(m["seed"].t == V::INT ? uint64_t(m["seed"].i) : stream_seed++)).first->second;
    Out o; observation(o, id, g, false, false, false); return send_all(c.fd, o.frame());
  }
  if (type != "step") throw runtime_error("unknown message type");
  if (found == c.episodes.end()) return error(c, id, "no such episode on this connection");
  const V& actions = m["actions"];
  if (actions.t != V::ARR || actions.a.size() != 1 || actions.a[0].t != V::INT || (actions.a[0].i != 0 && actions.a[0].i != 1)) { c.episodes.erase(found); return error(c, id, "actions must be [0] or [1]"); }
  bool done, truncated; found->second.step(int(actions.a[0].i), done, truncated);
  Out o; observation(o, id, found->second, true, done, truncated);
  if (done) c.episodes.erase(found);
  send_all(c.fd, o.frame());
}
bool receive(Client& c) {  // false: close the connection
  char chunk[65536]; ssize_t n = recv(c.fd, chunk, sizeof chunk, 0);
  if (n <= 0) return false;
  c.in.append(chunk, n);
  try {
    while (c.in.size() >= 4) {
      uint32_t length = uint32_t(uint8_t(c.in[0])) << 24 | uint32_t(uint8_t(c.in[1])) << 16 | uint32_t(uint8_t(c.in[2])) << 8 | uint8_t(c.in[3]);
      if (length > MAX_FRAME) throw runtime_error("a frame over max_frame");
      if (c.in.size() < 4 + length) break;
      Bytes body = c.in.substr(4, length); c.in.erase(0, 4 + length);
      Decoder d{body}; V m = d.read();
      if (d.at != body.size() || m.t != V::MAP || m["type"].t != V::STR) throw runtime_error("a message is one map with a type");
      handle(c, m);
    }
  } catch (const exception& e) { if (c.authenticated) try { error(c, 0, e.what(), false); } catch (...) {} return false; }
  return true;
}
int main(int argc, char** argv) {
  string bind = "127.0.0.1:0", secret_file;
  for (int k = 1; k + 1 < argc; k += 2) { if (string(argv[k]) == "--bind") bind = argv[k + 1]; else if (string(argv[k]) == "--secret") secret_file = argv[k + 1]; }
  ifstream file(secret_file); getline(file, secret); secret.erase(secret.find_last_not_of(" \t\r\n") + 1);
  if (secret.size() < 16) { cerr << "--secret FILE: at least 16 bytes of secret needed" << endl; return 2; }
  size_t colon = bind.rfind(':');
  sockaddr_in address{}; address.sin_family = AF_INET; address.sin_port = htons(stoi(bind.substr(colon + 1)));
  if (inet_pton(AF_INET, bind.substr(0, colon).c_str(), &address.sin_addr) != 1) { cerr << "--bind HOST:PORT (IPv4)" << endl; return 2; }
  int listener = socket(AF_INET, SOCK_STREAM, 0), yes = 1; setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  if (::bind(listener, (sockaddr*)&address, sizeof address) || listen(listener, 64)) { perror("bind"); return 1; }
  socklen_t size = sizeof address; getsockname(listener, (sockaddr*)&address, &size);
  cout << "serving tcp://" << bind.substr(0, colon) << ":" << ntohs(address.sin_port) << endl;
  vector<Client> clients;
  for (;;) {
    vector<pollfd> fds{{listener, POLLIN, 0}};
    for (auto& c : clients) fds.push_back({c.fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 100);
    auto now = chrono::steady_clock::now();
    for (size_t k = clients.size(); k-- > 0;) {
      Client& c = clients[k]; bool keep = true;
      if (fds[k + 1].revents) keep = receive(c);
      if (!c.authenticated && now > c.deadline) keep = false;  // 5 seconds to prove the secret
      if (!keep) { close(c.fd); clients.erase(clients.begin() + k); }
    }
    if (fds[0].revents & POLLIN) {
      Client c{accept(listener, nullptr, nullptr)}; setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
      c.nonce.resize(32); if (getrandom(&c.nonce[0], 32, 0) != 32) return 1;
      c.deadline = now + chrono::seconds(5);
      Out o; o.map(3).key("type").str("challenge").key("version").integer(1).key("nonce").bin(c.nonce);
      try { send_all(c.fd, o.frame()); clients.push_back(move(c)); } catch (...) { close(c.fd); }
    }
  }
}
