-- Headless Neovim as the LSP client of `shardlint server`: open a file, wait for the server's
-- diagnostics, hover one of them, print both, stop the server. Environment:
--   SHARDLINT_PY (python with shardlint), SHARDLINT_FILE (file to open), SHARDLINT_ROOT (root_dir),
--   SHARDLINT_HOVER_LINE (1-based line to hover, at the first diagnostic's column on it).
local python = assert(os.getenv("SHARDLINT_PY"))
local file = assert(os.getenv("SHARDLINT_FILE"))
local root = os.getenv("SHARDLINT_ROOT") or vim.fn.fnamemodify(file, ":p:h")
local hover_line = tonumber(os.getenv("SHARDLINT_HOVER_LINE") or "0")
local timeout_ms = tonumber(os.getenv("SHARDLINT_TIMEOUT_MS") or "30000")

local function out(msg)
  io.stdout:write(msg .. "\n")
  io.stdout:flush()
end

vim.cmd("edit " .. vim.fn.fnameescape(file))
local bufnr = vim.api.nvim_get_current_buf()
local config = { name = "shardlint", cmd = { python, "-m", "shardlint", "server" }, root_dir = root }
local client_id
if vim.lsp.start then -- Neovim >= 0.8
  client_id = vim.lsp.start(config, { bufnr = bufnr })
else -- Neovim 0.7 (Debian 12)
  client_id = vim.lsp.start_client(config)
  vim.lsp.buf_attach_client(bufnr, client_id)
end
local v = vim.version()
out(string.format("NVIM %d.%d.%d", v.major, v.minor, v.patch))

local ok = vim.wait(timeout_ms, function() return #vim.diagnostic.get(bufnr) > 0 end, 50)
local diags = vim.diagnostic.get(bufnr)
table.sort(diags, function(a, b) return a.lnum < b.lnum or (a.lnum == b.lnum and a.col < b.col) end)
for _, d in ipairs(diags) do
  local code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)
  out(string.format("DIAG %s %d %d %d %s", tostring(code), d.lnum + 1, d.col, d.severity, tostring(d.source)))
end

for _, d in ipairs(diags) do
  if d.lnum + 1 == hover_line then
    local params = { textDocument = vim.lsp.util.make_text_document_params(bufnr),
                     position = { line = d.lnum, character = d.col } }
    local replies = vim.lsp.buf_request_sync(bufnr, "textDocument/hover", params, 10000) or {}
    for _, reply in pairs(replies) do
      local contents = reply.result and reply.result.contents
      local value = type(contents) == "table" and contents.value or tostring(contents)
      out("HOVER " .. (vim.split(value or "", "\n")[1] or ""))
    end
    break
  end
end

local client = vim.lsp.get_client_by_id(client_id)
if client then
  client.stop()
  vim.wait(5000, function() return client.is_stopped() end, 50)
end
vim.cmd(ok and "qall!" or "cquit! 1")
