package redisstore

// InterpretError exposes the error choke point to the tests.
var InterpretError = interpretError
