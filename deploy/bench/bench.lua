-- wrk script of deploy/bench/run.sh, configured through the environment:
--   TOKEN        a bearer token sent on every request (optional)
--   MODE         "get" (default): GET the URL's path as given
--                "session": POST /v1/lingo/me/study-sessions, callers rotating over TOKENS_FILE
--                "like":    POST /v1/news/articles/art-NNNNNN/like, every request a new
--                           (caller, article) pair, callers from TOKENS_FILE
--                "hot":     POST /v1/news/articles/$HOT_ARTICLE/like, every request the next
--                           caller of TOKENS_FILE (distinct readers as long as tokens last)
--                "post-session": POST /v1/lingo/me/study-sessions with the body SESSION_BODY, every
--                           request the next caller of TOKENS_FILE across both threads (as "hot":
--                           no two requests in flight share a learner while tokens last)
--   TOKENS_FILE  one token per line (session, like, hot, post-session)
--   SESSION_BODY the JSON body of post-session
--   ARTICLES     how many articles exist (like; default 1000000)
-- On exit it prints one JSON line: requests/s, latency percentiles (ms), errors, 2xx count.

local mode = os.getenv("MODE") or "get"
local token = os.getenv("TOKEN")
local articles = tonumber(os.getenv("ARTICLES") or "1000000")
local threads = {}
local thread_count = 0

function setup(thread)
  thread:set("tid", thread_count)
  thread_count = thread_count + 1
  table.insert(threads, thread)
end

local tokens = {}
local counter = 0
ok = 0

function init(args)
  if token then wrk.headers["Authorization"] = "Bearer " .. token end
  if mode ~= "get" then
    for line in io.lines(os.getenv("TOKENS_FILE")) do table.insert(tokens, line) end
    wrk.method = "POST"
  end
  if mode == "session" then
    wrk.headers["Content-Type"] = "application/json"
    wrk.body = '{"duration_seconds":300,"phrases_seen":12,"phrases_correct":10,"language_code":"es"}'
  end
  if mode == "post-session" then
    wrk.headers["Content-Type"] = "application/json"
    wrk.body = os.getenv("SESSION_BODY")
  end
end

function request()
  if mode == "get" then return wrk.format() end
  counter = counter + 1
  local headers = {}
  for k, v in pairs(wrk.headers) do headers[k] = v end
  headers["Authorization"] = "Bearer " .. tokens[(counter % #tokens) + 1]
  if mode == "session" then
    return wrk.format("POST", "/v1/lingo/me/study-sessions", headers, wrk.body)
  end
  if mode == "post-session" then
    headers["Authorization"] = "Bearer " .. tokens[((counter - 1) * 2 + tid) % #tokens + 1]
    return wrk.format("POST", "/v1/lingo/me/study-sessions", headers, wrk.body)
  end
  if mode == "hot" then
    -- thread `tid` of 2 takes callers tid+1, tid+1+2, ...: no caller repeats while tokens last.
    headers["Authorization"] = "Bearer " .. tokens[((counter - 1) * 2 + tid) % #tokens + 1]
    return wrk.format("POST", "/v1/news/articles/" .. os.getenv("HOT_ARTICLE") .. "/like", headers, "")
  end
  -- like: thread `tid` of 2 takes articles tid+1, tid+1+2, ... so no pair repeats in a run.
  local n = ((counter - 1) * 2 + tid) % articles + 1
  return wrk.format("POST", string.format("/v1/news/articles/art-%06d/like", n), headers, "")
end

-- Counting 2xx costs a Lua call per response: only the write steps, which are checked against
-- the database, do it.
if mode ~= "get" then
  function response(status, headers, body)
    if status >= 200 and status < 300 then ok = ok + 1 end
  end
end

function done(summary, latency, requests)
  local success = 0
  for _, thread in ipairs(threads) do success = success + (thread:get("ok") or 0) end
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests":%d,"duration_s":%.3f,"rps":%.1f,"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,' ..
    '"max_ms":%.3f,"connect_errors":%d,"read_errors":%d,"write_errors":%d,"timeouts":%d,' ..
    '"non_2xx_3xx":%d,"ok_2xx":%d}\n',
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000, e.connect, e.read, e.write, e.timeout, e.status, success))
end
