-- wrk script: POST /observe bodies with fresh rows on every request (the
-- online HTTP benchmark, bench/online/http.sh).
--   WRK_KIND=point|messages WRK_ROWS=k wrk -s bench/online/observe.lua \
--       http://127.0.0.1:PORT/v1/models/NAME/observe
-- point: k rows of 4 standard normals, y = sin(2 x1) + 0.5 x2 x3 - 0.3 x4;
-- messages: k (normal, beta) tuples, m ~ U(-8, 8), v ~ U(0.1, 10), a label
-- y in {0, 1} as Beta(y + 1, 2 - y), and two targets (a mean and a log
-- variance of the same range as the logistic factor's). The values only
-- need to be valid: this measures the service, not the model.
-- WRK_IDEM=1: every request carries an Idempotency-Key of its own (the cost
-- of recording each answer with its log entry; docs/design/api.md).
local kind = os.getenv("WRK_KIND") or "point"
local rows = tonumber(os.getenv("WRK_ROWS") or "1")
local idem = os.getenv("WRK_IDEM") == "1"
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

-- Each thread's keys: a prefix of the run (time) and the thread's number,
-- then a counter: unique across threads and runs.
local threads = 0
function setup(thread)
   threads = threads + 1
   thread:set("thread_id", threads)
end
local run = tostring(os.time())
local counter = 0

local function normal()
   local u1, u2 = math.random(), math.random()
   if u1 < 1e-300 then u1 = 1e-300 end
   return math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
end

local function point_row()
   local x = {normal(), normal(), normal(), normal()}
   local y = math.sin(2 * x[1]) + 0.5 * x[2] * x[3] - 0.3 * x[4]
   return string.format("[%.6f,%.6f,%.6f,%.6f]", x[1], x[2], x[3], x[4]), string.format("%.6f", y)
end

local function message_row()
   local m, v = -8 + 16 * math.random(), 0.1 + 9.9 * math.random()
   local lab = math.random() < 0.5 and 1 or 0
   local x = string.format('{"messages":[{"normal":{"mean":%.6f,"var":%.6f}},{"beta":{"a":%d,"b":%d}}]}',
                           m, v, lab + 1, 2 - lab)
   local y = string.format("[%.6f,%.6f]", m + (lab == 1 and 0.5 or -0.5) * v / (1 + v), math.log(v / (1 + 0.2 * v)))
   return x, y
end

request = function()
   local xs, ys = {}, {}
   for i = 1, rows do
      local x, y
      if kind == "messages" then x, y = message_row() else x, y = point_row() end
      xs[i], ys[i] = x, y
   end
   local body = '{"X":[' .. table.concat(xs, ",") .. '],"y":[' .. table.concat(ys, ",") .. ']}'
   if idem then
      counter = counter + 1
      local key = string.format("bench-%s-%d-%d", run, thread_id or 0, counter)
      -- headers given to wrk.format replace wrk.headers: both named here
      return wrk.format(nil, nil, {["Content-Type"] = "application/json", ["Idempotency-Key"] = key},
                        body)
   end
   return wrk.format(nil, nil, nil, body)
end
