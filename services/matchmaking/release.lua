--[[
release.lua: give back a player's reservation once its ticket has ended (matched,
cancelled, expired, or never to be made), in his own slot. Compare-and-delete: a newer
reservation, or a request id answered with another ticket, is left alone.

KEYS[1]  active ticket hash     KEYS[2]  request key (optional)

ARGV[1]  ticket id             ARGV[2]  the request's answer (with KEYS[2])

Returns 1 when the reservation was released now, 0 when it held another ticket (or none).
]]

if #KEYS > 1 and redis.call('GET', KEYS[2]) == ARGV[2] then
  redis.call('DEL', KEYS[2])
end
if redis.call('HGET', KEYS[1], 'ticket') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
