public import DNSWire
public import NearbyBasics

// The value types the discovery API speaks, under NearbyDiscovery's name: `import
// NearbyDiscovery` is enough to use them, and nothing of the engine (MDNSCore, queries,
// packets) comes along. They are defined in DNSWire, Nearby's codec, which apps may import
// too for the wire level.

/// A DNS-SD service type such as `_openagents._tcp`, optionally narrowed to a subtype.
public typealias ServiceType = DNSWire.ServiceType
/// One service instance's full name: instance label, type and domain.
public typealias ServiceInstanceName = DNSWire.ServiceInstanceName
/// Why a service type or instance name was refused, with the rule it broke.
public typealias ServiceNameError = DNSWire.ServiceNameError
/// TXT "discovery info": key/value entries of at most 255 bytes each.
public typealias DiscoveryInfo = DNSWire.DiscoveryInfo
/// A DNS name, compared without regard to ASCII case.
public typealias DomainName = DNSWire.DomainName
/// An IPv4 or IPv6 address; link-local IPv6 addresses carry their interface.
public typealias IPAddress = DNSWire.IPAddress
public typealias IPv4Address = DNSWire.IPv4Address
public typealias IPv6Address = DNSWire.IPv6Address
/// A network interface: the kernel's index and its name.
public typealias NetworkInterface = DNSWire.NetworkInterface
/// A service to publish: what a ``DiscoveryBackend`` is asked to advertise.
public typealias ServiceRegistration = DNSWire.ServiceRegistration
/// Why a TXT entry was refused (too long, a bad key), naming the key, size and limit.
public typealias DiscoveryInfoError = DNSWire.DiscoveryInfoError
/// A value from an open set of named kinds (``DiscoveryError/Code``, the codes of errors):
/// switch over one with a `default:` branch, where kinds added later go.
public typealias OpenKind = NearbyBasics.OpenKind
