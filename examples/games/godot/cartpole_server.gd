# CartPole-v1 served from the Godot engine (3.x, headless), written from docs/games.md alone: the protocol's
# framing, MessagePack and HMAC-SHA256 by hand in GDScript (only the engine's SHA-256 is used), no add-on.
#
#   godot3-server --no-window -s examples/games/godot/cartpole_server.gd --bind 127.0.0.1:PORT --secret FILE
#
# or launched by the trainer (docs/games.md, "Launching your game from the trainer"):
#
#   python train.py -c mdp/game/cartpole.yml -m "mdp.game.launch=godot3-server --no-window -s
#       examples/games/godot/cartpole_server.gd --bind 127.0.0.1:{port} --secret {secret}"
#
# Prints "serving tcp://HOST:PORT" once it listens. One trainer seat, no bot (rule: false); gymnasium's physics,
# reward 1 a step, the episode ends when the pole falls past 12 degrees or the cart leaves +-2.4, or at 500 steps
# (truncated). Every connection is polled from the main loop; each answer is sent as soon as its request is read.
extends SceneTree

const VERSION = 1
const MAX_FRAME = 1048576
const MAX_EPISODES = 65536
const HANDSHAKE_LIMIT = 5.0
const TIME_LIMIT = 500
const GRAVITY = 9.8
const MASS_CART = 1.0
const MASS_POLE = 0.1
const LENGTH = 0.5
const FORCE = 10.0
const STEP_SECONDS = 0.02
const THETA_LIMIT = 12.0 * 2.0 * PI / 360.0
const X_LIMIT = 2.4

var server = TCP_Server.new()
var secret = PoolByteArray()
var crypto = Crypto.new()
var peers = []          # one Dictionary per connection (see _accept)


func _init():
	var arguments = _arguments()
	var bind = arguments.get("--bind", "127.0.0.1:0").rsplit(":", true, 1)
	var file = File.new()
	if not arguments.has("--secret") or file.open(arguments["--secret"], File.READ) != OK:
		printerr("usage: --secret FILE [--bind HOST:PORT] (the secret file could not be read)")
		quit(2)
		return
	secret = file.get_as_text().strip_edges().to_utf8()
	file.close()
	if server.listen(int(bind[1]), bind[0]) != OK:
		printerr("cannot listen on %s:%s" % [bind[0], bind[1]])
		quit(1)
		return
	print("serving tcp://%s:%s" % [bind[0], bind[1]])


func _arguments():
	var found = {}
	var words = OS.get_cmdline_args()
	for i in range(words.size() - 1):
		if words[i].begins_with("--"):
			found[words[i]] = words[i + 1]
	return found


func _idle(_delta):
	var busy = false
	while server.is_connection_available():
		_accept(server.take_connection())
		busy = true
	for peer in peers.duplicate():
		busy = _serve(peer) or busy
	if not busy:
		OS.delay_msec(1)        # nothing came: do not spin the core
	return false


func _accept(stream):
	stream.set_no_delay(true)
	var nonce = crypto.generate_random_bytes(32)
	var peer = {"stream": stream, "buffer": PoolByteArray(), "nonce": nonce, "authenticated": false,
		"since": OS.get_ticks_msec(), "episodes": {}}
	peers.append(peer)
	_send(peer, {"type": "challenge", "version": VERSION, "nonce": nonce})


func _drop(peer, message):
	if message != "":
		_send(peer, {"type": "error", "message": message})
	peer["stream"].disconnect_from_host()
	peers.erase(peer)


# ---- framing -----------------------------------------------------------------------------------------------
func _serve(peer):
	var stream = peer["stream"]
	if stream.get_status() != StreamPeerTCP.STATUS_CONNECTED:
		peers.erase(peer)
		return false
	if not peer["authenticated"] and OS.get_ticks_msec() - peer["since"] > HANDSHAKE_LIMIT * 1000:
		_drop(peer, "")
		return false
	var got = stream.get_partial_data(65536)
	if got[0] != OK:
		peers.erase(peer)
		return false
	if got[1].size() == 0:
		return false
	var received = peer["buffer"]          # pool arrays are values: append to a copy, store it back
	received.append_array(got[1])
	peer["buffer"] = received
	while peer["buffer"].size() >= 4:
		var buffer = peer["buffer"]
		var length = (buffer[0] << 24) | (buffer[1] << 16) | (buffer[2] << 8) | buffer[3]
		if length > MAX_FRAME:
			_drop(peer, "frame of %d bytes over max_frame" % length)
			return true
		if buffer.size() < 4 + length:
			break
		var body = buffer.subarray(4, 4 + length - 1) if length > 0 else PoolByteArray()
		peer["buffer"] = buffer.subarray(4 + length, buffer.size() - 1) if buffer.size() > 4 + length \
			else PoolByteArray()
		var reader = {"data": body, "at": 0, "bad": false}
		var message = _decode(reader)
		if reader["bad"] or reader["at"] != body.size() or typeof(message) != TYPE_DICTIONARY \
				or typeof(message.get("type")) != TYPE_STRING:
			_drop(peer, "protocol violation: a frame is not a msgpack map with a string type")
			return true
		if not _handle(peer, message):
			return true
	return true


func _send(peer, message):
	var body = _encode(message)
	var frame = StreamPeerBuffer.new()
	frame.big_endian = true
	frame.put_u32(body.size())
	frame.put_data(body)
	peer["stream"].put_data(frame.data_array)


# ---- the protocol ------------------------------------------------------------------------------------------
# One message of a connection; false when the connection was closed.
func _handle(peer, message):
	if not peer["authenticated"]:
		return _authenticate(peer, message)
	var kind = message["type"]
	if not kind in ["reset", "step", "close"]:
		_drop(peer, "protocol violation: unknown message type %s" % kind)
		return false
	var id = message.get("episode")
	if typeof(id) != TYPE_INT:
		_drop(peer, "protocol violation: the episode id is not an integer")
		return false
	var episodes = peer["episodes"]
	if kind == "close":
		episodes.erase(id)
	elif kind == "reset":
		_reset(peer, id, message)
	else:
		_step(peer, id, message)
	return true


func _authenticate(peer, auth):
	if auth["type"] != "auth" or auth.get("version") != VERSION or typeof(auth.get("nonce")) != TYPE_RAW_ARRAY \
			or auth["nonce"].size() != 32:
		_drop(peer, "protocol violation: expected auth of protocol version %d" % VERSION)
		return false
	var theirs = auth["nonce"]
	var expected = _hmac(secret, "client".to_ascii() + peer["nonce"] + theirs)
	if typeof(auth.get("proof")) != TYPE_RAW_ARRAY or not _equal(auth["proof"], expected):
		_drop(peer, "authentication failed")
		return false
	peer["authenticated"] = true
	var box = {"type": "box", "shape": [4], "dtype": "float32", "low": [-4.8, -INF, -0.41887903, -INF],
		"high": [4.8, INF, 0.41887903, INF]}
	_send(peer, {"type": "hello", "version": VERSION, "proof": _hmac(secret, "server".to_ascii() + theirs + peer["nonce"]),
		"players": [{"name": "cart", "observation": box, "action": {"type": "discrete", "n": 2, "start": 0}}],
		"rule": false, "max_frame": MAX_FRAME, "max_episodes": MAX_EPISODES})
	return true


func _refuse(peer, id, reason):
	peer["episodes"].erase(id)
	_send(peer, {"type": "error", "episode": id, "message": reason})


func _reset(peer, id, message):
	var episodes = peer["episodes"]
	if episodes.has(id):
		_refuse(peer, id, "episode %d is already running" % id)
	elif episodes.size() >= MAX_EPISODES:
		_refuse(peer, id, "over %d episodes on one connection" % MAX_EPISODES)
	elif message.get("seats") != [0]:
		_refuse(peer, id, "seats must be [0]: one seat, and no bot to play it")
	else:
		var random = RandomNumberGenerator.new()
		if typeof(message.get("seed")) == TYPE_INT:
			random.seed = message["seed"]
		else:
			random.randomize()
		var state = [0.0, 0.0, 0.0, 0.0]
		for i in range(4):
			state[i] = random.randf_range(-0.05, 0.05)
		episodes[id] = {"state": state, "steps": 0, "total": 0.0}
		_send(peer, _observation(id, state, 0.0, false, false, 0.0))


func _step(peer, id, message):
	var episode = peer["episodes"].get(id)
	if episode == null:
		_refuse(peer, id, "no episode %d runs on this connection" % id)
		return
	var actions = message.get("actions")
	if typeof(actions) != TYPE_ARRAY or actions.size() != 1 or typeof(actions[0]) != TYPE_INT \
			or not actions[0] in [0, 1]:
		_refuse(peer, id, "actions must be [0] or [1]")
		return
	var s = episode["state"]
	var force = FORCE if actions[0] == 1 else -FORCE
	var cosine = cos(s[2])
	var sine = sin(s[2])
	var total_mass = MASS_CART + MASS_POLE
	var pole = MASS_POLE * LENGTH
	var temp = (force + pole * s[3] * s[3] * sine) / total_mass
	var angular = (GRAVITY * sine - cosine * temp) / (LENGTH * (4.0 / 3.0 - MASS_POLE * cosine * cosine / total_mass))
	var linear = temp - pole * angular * cosine / total_mass
	s[0] += STEP_SECONDS * s[1]
	s[1] += STEP_SECONDS * linear
	s[2] += STEP_SECONDS * s[3]
	s[3] += STEP_SECONDS * angular
	episode["steps"] += 1
	episode["total"] += 1.0
	var terminated = s[0] < -X_LIMIT or s[0] > X_LIMIT or s[2] < -THETA_LIMIT or s[2] > THETA_LIMIT
	var truncated = not terminated and episode["steps"] >= TIME_LIMIT
	if terminated or truncated:
		peer["episodes"].erase(id)
	_send(peer, _observation(id, s, 1.0, terminated or truncated, truncated, episode["total"]))


func _observation(id, state, reward, done, truncated, total):
	var entry = {"observation": state, "reward": reward, "done": done, "truncated": truncated}
	if done:
		entry["result"] = {"fitness": total, "win": null, "objectives": {}}
	return {"type": "observation", "episode": id, "players": [entry]}


# ---- HMAC-SHA256 ---------------------------------------------------------------------------------------------
func _sha256(data):
	var context = HashingContext.new()
	context.start(HashingContext.HASH_SHA256)
	context.update(data)
	return context.finish()


func _hmac(key, message):
	if key.size() > 64:
		key = _sha256(key)
	var inner = PoolByteArray()
	var outer = PoolByteArray()
	for i in range(64):
		var byte = key[i] if i < key.size() else 0
		inner.append(byte ^ 0x36)
		outer.append(byte ^ 0x5c)
	return _sha256(outer + _sha256(inner + message))


func _equal(a, b):
	if a.size() != b.size():
		return false
	var difference = 0
	for i in range(a.size()):
		difference |= a[i] ^ b[i]
	return difference == 0


# ---- MessagePack -------------------------------------------------------------------------------------------
func _encode(value):
	var out = StreamPeerBuffer.new()
	out.big_endian = true
	_put(out, value)
	return out.data_array


func _put(out, value):
	match typeof(value):
		TYPE_NIL:
			out.put_u8(0xc0)
		TYPE_BOOL:
			out.put_u8(0xc3 if value else 0xc2)
		TYPE_INT:
			if value >= 0 and value < 128:
				out.put_u8(value)
			elif value < 0 and value >= -32:
				out.put_u8(value & 0xff)
			else:
				out.put_u8(0xd3)
				out.put_64(value)
		TYPE_REAL:
			out.put_u8(0xcb)
			out.put_double(value)
		TYPE_STRING:
			var bytes = value.to_utf8()
			out.put_u8(0xdb)
			out.put_u32(bytes.size())
			out.put_data(bytes)
		TYPE_RAW_ARRAY:
			out.put_u8(0xc6)
			out.put_u32(value.size())
			out.put_data(value)
		TYPE_ARRAY:
			out.put_u8(0xdd)
			out.put_u32(value.size())
			for item in value:
				_put(out, item)
		TYPE_DICTIONARY:
			out.put_u8(0xdf)
			out.put_u32(value.size())
			for key in value:
				_put(out, key)
				_put(out, value[key])


# The next count bytes as a big-endian StreamPeerBuffer (marks the reader bad past its end).
func _take(reader, count):
	var data = reader["data"]
	if reader["at"] + count > data.size():
		reader["bad"] = true
		return null
	var part = StreamPeerBuffer.new()
	part.big_endian = true
	part.data_array = data.subarray(reader["at"], reader["at"] + count - 1) if count > 0 else PoolByteArray()
	reader["at"] += count
	return part


func _decode(reader):
	var head = _take(reader, 1)
	if head == null:
		return null
	var code = head.get_u8()
	if code <= 0x7f:
		return code
	if code >= 0xe0:
		return code - 256
	if code >= 0xa0 and code <= 0xbf:
		return _text(reader, code - 0xa0)
	if code >= 0x90 and code <= 0x9f:
		return _list(reader, code - 0x90)
	if code >= 0x80 and code <= 0x8f:
		return _map(reader, code - 0x80)
	match code:
		0xc0:
			return null
		0xc2:
			return false
		0xc3:
			return true
		0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3, 0xca, 0xcb:
			return _number(reader, code)
		0xd9, 0xda, 0xdb:
			return _text(reader, _length(reader, code - 0xd9))
		0xc4, 0xc5, 0xc6:
			var raw = _take(reader, _length(reader, code - 0xc4))
			return null if raw == null else raw.data_array
		0xdc, 0xdd:
			return _list(reader, _length(reader, code - 0xdb))
		0xde, 0xdf:
			return _map(reader, _length(reader, code - 0xdd))
	reader["bad"] = true            # extension types and reserved codes: nothing the trainer sends
	return null


# A length of 1, 2 or 4 bytes (width 0, 1, 2).
func _length(reader, width):
	var part = _take(reader, [1, 2, 4][width])
	if part == null:
		return 0
	if width == 0:
		return part.get_u8()
	if width == 1:
		return part.get_u16()
	return part.get_u32()


func _number(reader, code):
	var sizes = {0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8, 0xd0: 1, 0xd1: 2, 0xd2: 4, 0xd3: 8, 0xca: 4, 0xcb: 8}
	var part = _take(reader, sizes[code])
	if part == null:
		return 0
	match code:
		0xcc:
			return part.get_u8()
		0xcd:
			return part.get_u16()
		0xce:
			return part.get_u32()
		0xcf:
			return part.get_u64()
		0xd0:
			return part.get_8()
		0xd1:
			return part.get_16()
		0xd2:
			return part.get_32()
		0xd3:
			return part.get_64()
		0xca:
			return part.get_float()
	return part.get_double()


func _text(reader, count):
	var part = _take(reader, count)
	return "" if part == null else part.data_array.get_string_from_utf8()


func _list(reader, count):
	var items = []
	for i in range(count):
		items.append(_decode(reader))
		if reader["bad"]:
			return null
	return items


func _map(reader, count):
	var entries = {}
	for i in range(count):
		var key = _decode(reader)
		var value = _decode(reader)
		if reader["bad"]:
			return null
		entries[key] = value
	return entries
