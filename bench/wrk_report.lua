-- wrk script of bench/load.py: POSTs its argument as JSON when there is one, counts the answers
-- that are not 200, and prints one JSON line the runner parses.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  non200 = 0
  if args[1] then -- wrk formats the request after init()
    wrk.method = "POST"
    wrk.body = args[1]
    wrk.headers["Content-Type"] = "application/json"
  end
end

function response(status, headers, body)
  if status ~= 200 then
    non200 = non200 + 1
  end
end

function done(summary, latency, requests)
  local bad = 0
  for _, thread in ipairs(threads) do
    bad = bad + thread:get("non200")
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests": %d, "duration_us": %d, "non200": %d, "socket_errors": %d, '
      .. '"p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d}\n',
    summary.requests, summary.duration, bad, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max
  ))
end
