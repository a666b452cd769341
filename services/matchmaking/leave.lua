--[[
leave.lua: take a waiting ticket out of its queue, as cancelled (the player asked) or
expired (nobody matched in time), in the queue's slot. A ticket already popped into a group
is not waiting and is refused, so a player who cancelled is never seated and a seated one is
never cancelled. The caller then releases the player's reservation (release.lua, his slot).

KEYS[1]  ticket hash     KEYS[2]  expiring zset     KEYS[3]  queue list

ARGV[1]  ticket id     ARGV[2]  new state ("cancelled" or "expired")
ARGV[3]  ticket channel     ARGV[4]  now ms     ARGV[5]  "1": only if its expiry has passed

Returns {1, new_state} when it left now, {0, current_state} otherwise ("" if no ticket).
]]

local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  return {0, ''}
end
if state ~= 'waiting' then
  return {0, state}
end
if ARGV[5] == '1' and tonumber(redis.call('HGET', KEYS[1], 'expire_ms')) > tonumber(ARGV[4]) then
  return {0, state}
end
redis.call('LREM', KEYS[3], 1, ARGV[1])
redis.call('HSET', KEYS[1], 'state', ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[3], ARGV[2])
return {1, ARGV[2]}
