--[[
seed_balances.lua: put players' wallet balances, read when they sat down, into the table's
balances hash, never over a value the settlement workers wrote, and let the hash live as
long as the table's state does (a table that never starts expires whole).

KEYS[1]  balances hash  player -> tokens (the workers' settle.lua writes it after each phase)
KEYS[2]  state hash     read only: its TTL (a waiting table's) is copied; none: persist
ARGV     player, tokens, player, tokens, ...

Returns the number of balances written.
]]

local written = 0
for i = 1, #ARGV, 2 do
  written = written + redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1])
end
local ttl = redis.call('PTTL', KEYS[2])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
elseif ttl == -1 then
  redis.call('PERSIST', KEYS[1])
end
return written
