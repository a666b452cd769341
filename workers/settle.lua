--[[ settle.lua: mark one round phase settled and tell the table, atomically.

KEYS[1]  settled hash   kishpa:table:{<id>}:settled   field "<round>:<phase>" -> settlement JSON
KEYS[2]  balances hash  kishpa:table:{<id>}:balances  player id -> balance after settlement
KEYS[3]  events stream  kishpa:table:{<id>}:events    the table's event stream
KEYS[4]  state hash     kishpa:table:{<id>}:state     read only: its TTL says the table closed
KEYS[5]  outbox hash    kishpa:table:{<id>}:outbox    the phase records
(all share the table's hash tag, so one cluster slot holds them)

ARGV[1]  phase field "<round>:<phase>"
ARGV[2]  settlement JSON {"batch_id", "balances", "settled_ms"}
ARGV[3]  order of the phase at the table (round * 16 + rank of the phase), an integer
ARGV[4]  number n of fields of the `settled` event (shared/stream.py format)
then     n pairs field, value of the event
then     player id, balance, player id, balance, ...

The new event id is PUBLISHed on the channel named like the events stream (the table
service's shared WatchTable fan-out wakes on it; shared/keys.py `notify`).

Returns  {1, event id} when this call settled the phase,
         {0, ""}       when it was settled already (nothing is written or published again).

Balances are written only when no later phase of the table has been settled yet, so a late
retry of an old phase never overwrites newer balances.

Once a closed table (its state expiring) has every outbox phase settled, the outbox, the
settled and the balances hashes get the state's remaining TTL: they go with the table, and
the sweeper stops reading them.

Redis holds only live play. When a phase of round R of a table that plays on is settled
here, every round before R is settled, hence archived (the workers write the archive before
this script runs, and settle a table's phases in order), and what only history needs goes,
in the same atomic step:
- the events before round R's first one (XTRIM MINID; round R's seed commitment and
  contributions, sent before it, count as its own). Settling R's `end` keeps R (the round
  that just ended, shown until the next deal); settling R + 1's `start` (right after its
  deal) lets R go: while a round is played the stream holds that round alone (the archive
  serves an ended round's record, GetRoundRecord). The settled hash's `_events_from` says
  where it starts now; a watcher resuming from before it is told EVENTS_TRIMMED
  (docs/api.md) and reloads the view. While a phase of an earlier round is unsettled
  (dead-lettered, so not archived) nothing is trimmed: its round stays verifiable from the
  stream;
- when the phase ENDS round R (rank 1 in ARGV[3]: `end`, `payout`), the phase records and
  settled marks of the rounds before R that are settled (both hashes; a round's are small,
  so the previous round's stay until the current one ends); a phase still unsettled
  (dead-lettered) keeps its record. `_trimmed` = R - 1 remembers it, so a redelivered task
  of a trimmed phase is answered "settled already" (its record is gone), never settled
  twice.
]]
local function round_of(order)
  return math.floor(tonumber(order) / 16)
end

-- Whether a stream entry (flat fields) is part of round `round` or later: its own round, or
-- a deal's seed commitment or contribution, sent before the deal (with the round before)
-- and needed to verify it (games/contributions.py).
local function belongs_to(fields, round)
  local entry = {}
  for j = 1, #fields, 2 do
    entry[fields[j]] = fields[j + 1]
  end
  if tonumber(entry['round'] or '0') >= round then
    return true
  end
  if entry['type'] == 'seed_committed' or entry['type'] == 'contribution_accepted' then
    local ok, data = pcall(cjson.decode, entry['data'] or '{}')
    return ok and type(data) == 'table' and tonumber(data['deal'] or 0) >= round
  end
  return false
end

if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return {0, ''}
end
local trimmed_round = tonumber(redis.call('HGET', KEYS[1], '_trimmed') or '-1')
if round_of(ARGV[3]) <= trimmed_round and redis.call('HEXISTS', KEYS[5], ARGV[1]) == 0 then
  return {0, ''}  -- settled, then trimmed: a redelivery
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])

local n = tonumber(ARGV[4])
local entry = {}
for j = 1, 2 * n do
  entry[j] = ARGV[4 + j]
end
local first_balance = 5 + 2 * n

local order = tonumber(ARGV[3])
local latest = tonumber(redis.call('HGET', KEYS[1], '_balances_order') or '-1')
if order >= latest and #ARGV >= first_balance then
  redis.call('HSET', KEYS[1], '_balances_order', ARGV[3])
  for i = first_balance, #ARGV, 2 do
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  end
end

local id = redis.call('XADD', KEYS[3], '*', unpack(entry))
redis.call('PUBLISH', KEYS[3], id)

-- Only while the table plays on (its state has no expiry): a closing table's keys all go
-- with it, and a Hand table's only ending phase is its last (its deals stay verifiable).
if redis.call('PTTL', KEYS[4]) == -1 then
  local round = round_of(ARGV[3])
  -- A phase of an earlier round still unsettled: not archived, so its round's events stay.
  -- (A later phase of this round may be pending already: the round is played on.)
  local earlier_unsettled = false
  for _, field in ipairs(redis.call('HKEYS', KEYS[5])) do
    local r = tonumber(string.match(field, '^(%d+):'))
    if r and r < round and redis.call('HEXISTS', KEYS[1], field) == 0 then
      earlier_unsettled = true
      break
    end
  end
  -- The first event of round R: the stream holds about one round, so this reads little.
  local keep_from = nil
  local from = '-'
  while keep_from == nil and not earlier_unsettled do
    local page = redis.call('XRANGE', KEYS[3], from, '+', 'COUNT', 100)
    if #page == 0 then
      break
    end
    for _, item in ipairs(page) do
      if belongs_to(item[2], round) then
        keep_from = item[1]
        break
      end
    end
    from = '(' .. page[#page][1]
  end
  if keep_from and redis.call('XTRIM', KEYS[3], 'MINID', keep_from) > 0 then
    redis.call('HSET', KEYS[1], '_events_from', keep_from)
  end
  if tonumber(ARGV[3]) % 16 >= 1 then
    for _, field in ipairs(redis.call('HKEYS', KEYS[5])) do
      local r = tonumber(string.match(field, '^(%d+):'))
      if r and r < round and redis.call('HEXISTS', KEYS[1], field) == 1 then
        redis.call('HDEL', KEYS[5], field)
        redis.call('HDEL', KEYS[1], field)
      end
    end
    if round - 1 > trimmed_round then
      redis.call('HSET', KEYS[1], '_trimmed', round - 1)
    end
  end
end

local ttl = redis.call('PTTL', KEYS[4])
if ttl > 0 then
  local done = true
  for _, field in ipairs(redis.call('HKEYS', KEYS[5])) do
    if redis.call('HEXISTS', KEYS[1], field) == 0 then
      done = false
      break
    end
  end
  if done then
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl)
    redis.call('PEXPIRE', KEYS[5], ttl)
  end
end
return {1, id}
