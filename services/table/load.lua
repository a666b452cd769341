--[[
load.lua: a mutation's read in one round trip: the request's first answer if it was already
answered, else the table's state, version and deadline.

A replay must get the first answer even when the move is illegal by now, so the answer is
looked at before the state (commit.lua looks again, for replays that race this one).

KEYS[1]  state hash     fields: version, state, deadline
KEYS[2]  requests hash  "<player>:<request_id>" -> first answer (and "... from" -> the id
                        of its commit's first event)
ARGV[1]  request field ("" when the call carries no request id)

Returns
  {1, answer, first_event_id or ""}    the request was already answered
  {0, version, state, deadline}        otherwise (false for absent fields: no such table)
]]

if ARGV[1] ~= '' then
  local answer = redis.call('HGET', KEYS[2], ARGV[1])
  if answer then
    return {1, answer, redis.call('HGET', KEYS[2], ARGV[1] .. ' from') or ''}
  end
end
local fields = redis.call('HMGET', KEYS[1], 'version', 'state', 'deadline')
return {0, fields[1], fields[2], fields[3]}
