-- wrk script: POST the body read from the file named by $WRK_BODY as JSON.
--   WRK_BODY=body.json wrk -s bench/http/post.lua http://127.0.0.1:PORT/v1/models/NAME/predict
local path = os.getenv("WRK_BODY")
assert(path, "set WRK_BODY to the file holding the request body")
local f = assert(io.open(path, "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
