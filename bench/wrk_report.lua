-- wrk script of bench/load.py: POSTs its argument as JSON when there is one; prints one JSON line
-- [seconds, requests, errors (answers not 2xx/3xx, socket errors), p50, p90, p99, max ms].
function init(args)
  if args[1] then -- wrk formats the request after init()
    wrk.method, wrk.body, wrk.headers["Content-Type"] = "POST", args[1], "application/json"
  end
end

function done(s, latency)
  local e, q = s.errors, function(p) return latency:percentile(p) / 1000 end
  io.write(string.format("BENCH_JSON [%f, %d, %d, %f, %f, %f, %f]\n", s.duration / 1e6,
    s.requests, e.status + e.connect + e.read + e.write + e.timeout, q(50), q(90), q(99),
    latency.max / 1000))
end
