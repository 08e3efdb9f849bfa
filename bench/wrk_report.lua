-- wrk script of bench/load.py: caps the requests per thread (first script argument), POSTs the
-- second argument as JSON when there is one, counts every answer that is not 200, and prints
-- one JSON line the runner parses.
--
-- wrk's own duration is always the -d it was given, even when every thread stopped early at
-- the cap, so each thread also notes when it started and when it stopped (monotonic clock,
-- through LuaJIT's FFI) to give the real duration of a capped run.
local ok, ffi = pcall(require, "ffi")
local now_us = function() return 0 end
if ok then
  ffi.cdef([[
    typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
    int clock_gettime(int clk_id, bench_timespec *tp);
  ]])
  local ts = ffi.new("bench_timespec")
  now_us = function()
    ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
    return tonumber(ts.tv_sec) * 1000000 + tonumber(ts.tv_nsec) / 1000
  end
end

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  cap = tonumber(args[1] or "0") or 0
  if args[2] then -- wrk formats the request after init()
    wrk.method = "POST"
    wrk.body = args[2]
    wrk.headers["Content-Type"] = "application/json"
  end
  answered = 0
  non200 = 0
  started = now_us()
  stopped = 0
end

function response(status, headers, body)
  answered = answered + 1
  if status ~= 200 then
    non200 = non200 + 1
  end
  if cap > 0 and answered >= cap then
    stopped = now_us()
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local bad = 0
  local first, last, all_stopped = nil, 0, true
  for _, thread in ipairs(threads) do
    bad = bad + (tonumber(thread:get("non200")) or 0)
    local s, t = tonumber(thread:get("started")) or 0, tonumber(thread:get("stopped")) or 0
    if t == 0 or s == 0 then
      all_stopped = false
    else
      if first == nil or s < first then first = s end
      if t > last then last = t end
    end
  end
  local capped_us = 0
  if all_stopped and first ~= nil then
    capped_us = last - first
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests": %d, "duration_us": %d, "capped_duration_us": %d, "bytes": %d, '
      .. '"non200": %d, "connect_errors": %d, "read_errors": %d, "write_errors": %d, '
      .. '"timeouts": %d, "status_errors": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, '
      .. '"mean_us": %.1f, "max_us": %d}\n',
    summary.requests, summary.duration, capped_us, summary.bytes, bad,
    e.connect, e.read, e.write, e.timeout, e.status,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.mean, latency.max
  ))
end
