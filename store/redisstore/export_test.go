package redisstore

// InterpretError exposes the error choke point to the tests.
var InterpretError = interpretError

// AcquireScriptHash is the SHA1 the acquire script is called by (EVALSHA).
var AcquireScriptHash = acquireScript.Hash()
