--[[
commit.lua: commit one table transition atomically, only if the table's version is unchanged.

The rules are NOT here: Python computed the next state and its events; this script only
checks the version, writes, appends and remembers, all or nothing.

KEYS[1]  state hash     fields: version (int), state (JSON), deadline (ms or absent)
KEYS[2]  events stream  the table's Redis Stream
KEYS[3]  requests hash  "<player>:<request_id>" -> first answer;
                        "<player>:<request_id> from" -> id of that commit's first event;
                        "<player>:<request_id> t" -> when it was answered (ms)
                        (request ids have no spaces, so no request's own field looks like
                        a marker: with "|from", a request id "r|from" sent after "r" was
                        answered with r's event id as its answer)
KEYS[4]  outbox hash    "<round>:<phase>" -> JSON phase record for settlement
KEYS[5]  balances hash  player -> balance (read only: returned so the answer needs no extra read)
KEYS[6]  optional: the unsettled index shard of the table (keys.unsettled). Given on one
         Redis node only: on a cluster it lives in another slot, and the caller indexes
         the table right after the commit instead.
KEYS[7]  optional (one node only, like KEYS[6]): the deadline index shard of this code's
         state version; the table's member is set to the new deadline, or removed when it
         waits for nobody. Absent: the caller updates the index itself, or it is unchanged.
KEYS[8..] the older versions' deadline index shards: the table leaves them.

ARGV[1]  expected version ("0": the table must not exist yet)
ARGV[2]  new state JSON
ARGV[3]  request field ("" when the call carries no request id)
ARGV[4]  answer to remember under the request field
ARGV[5]  deadline in ms ("" when the table waits for nobody)
ARGV[6]  expiry in seconds (a finished or a still-waiting table); "0": no expiry (PERSIST)
ARGV[7]  number of events E
ARGV[8]  number of outbox records P
ARGV[9]  the table id (its member in the indexes, KEYS[6..])
ARGV[10] created_ms of the earliest of the P records ("" when P is 0)
ARGV[11] the new state's revision: a random token written with it, so that a state this
         process kept since its own commit is known to be the one still stored, even where
         the version alone could repeat (a table re-created under its id, or Redis restarted
         from an older copy and the table played on by another process)
ARGV[12] the revision the state must still have ("": the version alone is checked)
ARGV[13] now in ms (the caller's clock)
ARGV[14] how long answers are remembered, in ms ("0": for the table's life). Every 64th
         version the answers older than that are dropped: a table that plays for hours
         would otherwise keep every answer it ever gave (clients retry for seconds)
ARGV[15] how many answers are remembered per player ("0": no bound): a player's older
         answers go as he sends new requests (a client retries only what it has not seen
         answered: its few requests in flight). The player's request ids, oldest first,
         are in the field "<player> recent" (ids have no spaces, player ids no ':')
then E events, each as: n, key1, value1, ..., keyn, valuen
then P outbox records, each as: field, JSON

After appending events it PUBLISHes the last event id on the channel named like the events
stream (keys.notify): the shared WatchTable fan-out (fanout.py) wakes on it.

Returns
  {1, new_version, {player, balance, ...}, previous_id, event_id_1, ..., event_id_E}
                                                 committed; previous_id is the stream's last
                                                 entry before these ("0-0": none; "" when E
                                                 is 0), so this process's fan-out can hand
                                                 the new entries to its watchers unread
  {0, current_version, state, deadline}          version (or revision) conflict: retry on
                                                 the state returned (false: no such table)
  {2, answer, first_event_id or ""}              the request was already answered: nothing changed
]]

if ARGV[3] ~= '' then
  local answer = redis.call('HGET', KEYS[3], ARGV[3])
  if answer then
    return {2, answer, redis.call('HGET', KEYS[3], ARGV[3] .. ' from') or ''}
  end
end

local stored = redis.call('HMGET', KEYS[1], 'version', 'rev')
local current = tonumber(stored[1] or '0')
if current ~= tonumber(ARGV[1]) or (ARGV[12] ~= '' and stored[2] ~= ARGV[12]) then
  local fields = redis.call('HMGET', KEYS[1], 'state', 'deadline')
  return {0, current, fields[1], fields[2]}
end

local version = current + 1
redis.call('HSET', KEYS[1], 'version', version, 'state', ARGV[2], 'rev', ARGV[11])
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[1], 'deadline', ARGV[5])
else
  redis.call('HDEL', KEYS[1], 'deadline')
end

local result = {1, version, redis.call('HGETALL', KEYS[5]), ''}
if tonumber(ARGV[7]) > 0 then
  local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
  result[4] = last[1] and last[1][1] or '0-0'
end
local i = 16
for _ = 1, tonumber(ARGV[7]) do
  local n = tonumber(ARGV[i])
  local entry = {}
  for j = 1, 2 * n do
    entry[j] = ARGV[i + j]
  end
  result[#result + 1] = redis.call('XADD', KEYS[2], '*', unpack(entry))
  i = i + 1 + 2 * n
end

if tonumber(ARGV[7]) > 0 then
  redis.call('PUBLISH', KEYS[2], result[#result])
end

for _ = 1, tonumber(ARGV[8]) do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
  i = i + 2
end
if KEYS[6] and tonumber(ARGV[8]) > 0 then
  -- LT keeps the earliest unsettled phase's time when the table is indexed already.
  redis.call('ZADD', KEYS[6], 'LT', ARGV[10], ARGV[9])
end

if KEYS[7] then
  if ARGV[5] ~= '' then
    redis.call('ZADD', KEYS[7], ARGV[5], ARGV[9])
  else
    redis.call('ZREM', KEYS[7], ARGV[9])
  end
  for k = 8, #KEYS do
    redis.call('ZREM', KEYS[k], ARGV[9])
  end
end

local memory_ms = tonumber(ARGV[14])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
  if tonumber(ARGV[7]) > 0 then
    -- A replay answers with the same watch cursor: just before this call's own events.
    redis.call('HSET', KEYS[3], ARGV[3] .. ' from', result[5])
  end
  if memory_ms > 0 then
    redis.call('HSET', KEYS[3], ARGV[3] .. ' t', ARGV[13])
  end
  local per_player = tonumber(ARGV[15])
  local player = string.match(ARGV[3], '^([^:]*):')
  if per_player > 0 and player then
    local recent_field = player .. ' recent'
    local ids = {}
    for id in string.gmatch(redis.call('HGET', KEYS[3], recent_field) or '', '%S+') do
      ids[#ids + 1] = id
    end
    ids[#ids + 1] = string.sub(ARGV[3], #player + 2)
    while #ids > per_player do
      local gone = player .. ':' .. table.remove(ids, 1)
      redis.call('HDEL', KEYS[3], gone, gone .. ' from', gone .. ' t')
    end
    redis.call('HSET', KEYS[3], recent_field, table.concat(ids, ' '))
  end
end
if memory_ms > 0 and version % 64 == 0 then
  local cutoff = tonumber(ARGV[13]) - memory_ms
  local flat = redis.call('HGETALL', KEYS[3])
  for j = 1, #flat, 2 do
    local field = flat[j]
    if string.sub(field, -2) == ' t' and tonumber(flat[j + 1]) < cutoff then
      local base = string.sub(field, 1, -3)
      redis.call('HDEL', KEYS[3], base, base .. ' from', field)
    end
  end
end

local ttl = tonumber(ARGV[6])
for k = 1, 3 do
  if ttl > 0 then
    redis.call('EXPIRE', KEYS[k], ttl)
  else
    redis.call('PERSIST', KEYS[k])
  end
end

return result
