--[[
claim.lua: a player's first step into a queue, in his own slot: reserve his one queue at a
time and record the request id, atomically. The ticket itself is made afterwards in the
queue's slot (join.lua) from what the reservation holds, by this caller or, if it died, by
the player's next request: a reservation is released only once its ticket has ended.

KEYS[1]  active ticket hash   the reservation: ticket, created_ms, expire_ms, name, seed,
                              contributes ("1": the client contributes to every deal)
KEYS[2]  request key          the player's request id -> "<ticket id> <queue asked for>"

ARGV[1]  ticket id     ARGV[2]  created ms     ARGV[3]  expiry ms
ARGV[4]  name          ARGV[5]  client seed    ARGV[6]  request ttl s
ARGV[7]  reservation ttl s   ARGV[8]  the request's answer: "<ticket id> <queue asked for>"
ARGV[9]  contributes ("1" or "0")

Returns
  {"replay", answer[, created, expiry, name, seed, contributes]}
      the request id was answered before: nothing changed. The reservation's fields follow
      when it still holds that ticket, so the caller can finish a join that was cut short
  {"active", ticket_id, created, expiry, name, seed, contributes}
      the player holds another reservation: nothing changed; the caller looks at its ticket
  {"claimed", ticket_id}
      reserved now for ARGV[1]
]]

local r = redis.call('HMGET', KEYS[1], 'ticket', 'created_ms', 'expire_ms', 'name', 'seed',
  'contributes')
-- A reservation made before the flag existed: its client did not declare.
local contributes = r[6] or '0'

local replay = redis.call('GET', KEYS[2])
if replay then
  if r[1] and r[1] == string.match(replay, '^%S+') then
    return {'replay', replay, r[2], r[3], r[4], r[5], contributes}
  end
  return {'replay', replay}
end

if r[1] then
  return {'active', r[1], r[2], r[3], r[4], r[5], contributes}
end

redis.call('HSET', KEYS[1], 'ticket', ARGV[1], 'created_ms', ARGV[2], 'expire_ms', ARGV[3],
  'name', ARGV[4], 'seed', ARGV[5], 'contributes', ARGV[9])
redis.call('EXPIRE', KEYS[1], ARGV[7])
redis.call('SET', KEYS[2], ARGV[8], 'EX', ARGV[6])
return {'claimed', ARGV[1]}
