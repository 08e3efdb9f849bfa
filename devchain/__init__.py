"""The local chain for the demo, the tests and the benchmarks: the Solidity sources, their solcjs
build, anvil, and the deployment of the demo LATs. Never imported by the runtime apps."""
