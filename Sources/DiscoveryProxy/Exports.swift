// `import DiscoveryProxy` brings the answering machine and its types (ProxyZone,
// ProxyStateMachine, RecordTranslation, ProxyError), which the shell's API is made of.
@_exported import DiscoveryProxyCore
