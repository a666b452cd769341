--[[
claim.lua: claim tables whose deadline has passed, so one replica handles each at a time.

A claimed table's score moves to now + lease: if the claiming replica dies before it commits
the timeout, another replica claims the table again when the lease runs out. The timeout
itself is applied through commit.lua's version check, so even two claims cannot both apply it.

KEYS[1]  deadlines sorted set  table_id -> deadline (ms)
ARGV[1]  now (ms)
ARGV[2]  lease (ms)
ARGV[3]  most tables to claim

Returns  the claimed table ids (possibly empty)
]]

local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local until_ms = tonumber(ARGV[1]) + tonumber(ARGV[2])
for _, table_id in ipairs(due) do
  redis.call('ZADD', KEYS[1], 'XX', until_ms, table_id)
end
return due
