-- wrk script for scangate's load benchmark: POST /observe with a JSON scan key per request.
--   wrk -t2 -c64 -d15s -s bench/observe.lua http://127.0.0.1:8080 -- REPEAT [COUNT]
-- REPEAT (or env BENCH_REPEAT; default 0): share of requests that re-send a key this thread sent earlier
--   (uniform over the thread's earlier keys); every other request sends a key never sent before:
--   "<run id>-<thread>-<counter>", the run id random per wrk invocation, so runs never share keys — unless env
--   BENCH_RUN_ID sets it: a second run with the same id, thread count and REPEAT 0 re-sends the first run's keys in
--   order (bench/follow/commit_repeats.py: repeats recorded by another instance).
-- env BENCH_KEYS=gs1: each key is a GS1 DataMatrix element string of one pack (GTIN, expiry, lot, FNC1, serial
--   "<run id[1..8]><thread>Z<counter>"), the same string for --keys=raw and --keys=gs1 cells (issue 24).
-- env BENCH_IDEMPOTENCY=1 (issue 34): every request carries an Idempotency-Key of its own ("<run id>-<thread>-i<seq>"),
--   as a till sends a fresh one per scan (a repeat is a new scan: a new key); the server writes the idempotency
--   record with each new key's row and answers the repeats (second scans) from its recent set (issue 44).
-- env BENCH_SOURCE: the "source" every request sends (default "wrk"; issue 45's bytes per key: "till-07").
-- COUNT (or env BENCH_COUNT_STATUS; default 1): 1 = count responses per status with response() (wrk then
--   parses every response in Lua, which costs wrk CPU); 0 = no response() hook (wrk still counts non-2xx/3xx).
-- done() prints one line "BENCH_SUMMARY {json}" with requests, rps, latency p50/p99/max (us), socket
-- errors, non-2xx and per-status counts.

repeat_share = tonumber(os.getenv("BENCH_REPEAT") or "0")  -- global: done() reads it back with thread:get
local count_status = (os.getenv("BENCH_COUNT_STATUS") or "1") ~= "0"
local gs1_keys = os.getenv("BENCH_KEYS") == "gs1"
local idempotency = os.getenv("BENCH_IDEMPOTENCY") == "1"
local source = os.getenv("BENCH_SOURCE") or "wrk"
local seq = 0

local threads = {}
run_id = nil     -- global: setup() copies it into each thread's state with thread:set

function setup(thread)
  if run_id == nil then
    math.randomseed(os.time() + math.floor(os.clock() * 1e6))
    run_id = os.getenv("BENCH_RUN_ID") or string.format("%08x%08x", math.random(0, 0x7fffffff), math.random(0, 0x7fffffff))
  end
  thread:set("thread_id", #threads)
  thread:set("run_id", run_id)
  table.insert(threads, thread)
end

local prefix
local counter = 0
local headers = { ["Content-Type"] = "application/json" }
statuses = {}

function init(args)
  if args[1] then repeat_share = tonumber(args[1]) end
  if args[2] then count_status = args[2] ~= "0" end
  prefix = run_id .. "-" .. thread_id .. "-"
  if gs1_keys then
    -- ]d2 01 <GTIN-14> 17 <YYMMDD> 10 <lot> <GS> 21 <serial>: the serial (<= 20 characters) ends the string.
    prefix = "]d201003614140300081727123110LOT42\\u001d21" .. string.sub(run_id, 1, 8) .. thread_id .. "Z"
  end
  math.randomseed(os.time() + thread_id * 7919 + math.floor(os.clock() * 1e6))
  if count_status then
    response = function(status, hdrs, body)
      statuses[status] = (statuses[status] or 0) + 1
    end
  end
end

function request()
  local n
  if counter > 0 and repeat_share > 0 and math.random() < repeat_share then
    n = math.random(0, counter - 1)
  else
    n = counter
    counter = counter + 1
  end
  local body = '{"key":"' .. prefix .. n .. '","source":"' .. source .. '"}'
  if idempotency then
    seq = seq + 1
    return wrk.format("POST", "/observe",
                      { ["Content-Type"] = "application/json", ["Idempotency-Key"] = run_id .. "-" .. thread_id .. "-i" .. seq },
                      body)
  end
  return wrk.format("POST", "/observe", headers, body)
end

function done(summary, latency, requests)
  local by_status = {}
  local non2xx_counted = 0
  for _, t in ipairs(threads) do
    local s = t:get("statuses")
    if s then
      for code, n in pairs(s) do
        by_status[code] = (by_status[code] or 0) + n
        if code < 200 or code > 299 then non2xx_counted = non2xx_counted + n end
      end
    end
  end
  local parts = {}
  for code, n in pairs(by_status) do table.insert(parts, string.format('"%d":%d', code, n)) end
  if threads[1] then repeat_share = threads[1]:get("repeat_share") or repeat_share end
  local e = summary.errors
  local secs = summary.duration / 1e6
  io.write(string.format(
    'BENCH_SUMMARY {"requests":%d,"duration_s":%.3f,"rps":%.1f,"p50_us":%d,"p99_us":%d,"max_us":%d,' ..
    '"mean_us":%.1f,"err_connect":%d,"err_read":%d,"err_write":%d,"err_timeout":%d,"non2xx":%d,' ..
    '"non2xx_counted":%s,"repeat_share":%.3f,"status":{%s}}\n',
    summary.requests, secs, summary.requests / secs, latency:percentile(50), latency:percentile(99),
    latency.max, latency.mean, e.connect, e.read, e.write, e.timeout, e.status,
    count_status and tostring(non2xx_counted) or "null", repeat_share, table.concat(parts, ",")))
end
