package storeopen

// ConsulConfig exposes consulConfig to the tests.
var ConsulConfig = consulConfig
