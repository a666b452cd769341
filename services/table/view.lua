--[[
view.lua: read what a view needs in one atomic step (one command instead of a MULTI).

KEYS[1]  state hash     fields: version, state
KEYS[2]  events stream  its last entry id is the last event the view includes
KEYS[3]  balances hash  player -> balance

Returns  {version | false, state | false, last_event_id ("0-0" when none), {player, balance, ...}}
]]

local fields = redis.call('HMGET', KEYS[1], 'version', 'state')
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
local last_id = '0-0'
if last[1] then
  last_id = last[1][1]
end
return {fields[1], fields[2], last_id, redis.call('HGETALL', KEYS[3])}
