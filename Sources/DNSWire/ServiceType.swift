import NearbyBasics

/// Why a service type, subtype or instance name was refused. The description says each thing
/// once: what was given (its first 40 characters when longer), what it is not, and which rule
/// it broke, e.g. `"openagents._tcp" is not a service type: the service name must begin with an
/// underscore, as in "_openagents._tcp"`. Wrap it with nothing more than its context.
public struct ServiceNameError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The text refused, whole.
    public var input: String
    /// The rule it broke and what is allowed, without the input.
    public var reason: String
    /// What was refused, in words: "service type", "subtype", "instance name".
    public var subject: String

    public init(input: String, reason: String, subject: String = "service type") {
        self.input = input
        self.reason = reason
        self.subject = subject
    }

    public var description: String {
        let article = subject.first.map { "aeiou".contains($0) } == true ? "an" : "a"
        return "\(input.quotedPrefix()) is not \(article) \(subject): \(reason)"
    }
}

/// A DNS-SD service type such as `_openagents._tcp`, optionally narrowed to a subtype
/// (`_printer._sub._http._tcp`), in a domain (`local.` by default). RFC 6763 §7, RFC 6335 §5.1.
public struct ServiceType: Hashable, Sendable, CustomStringConvertible, LosslessStringConvertible {
    /// The transport label: `_tcp` for services over TCP, `_udp` for everything else.
    public enum Transport: String, Hashable, Sendable {
        case tcp = "_tcp"
        case udp = "_udp"
    }

    /// The service name without its underscore, e.g. `openagents`.
    public let name: String
    public let transport: Transport
    /// The subtype label as written (conventionally with a leading underscore), if any.
    public let subtype: String?
    /// The domain, `local.` for mDNS.
    public let domain: DomainName

    /// The mDNS domain.
    public static let localDomain: DomainName = "local."

    /// Makes a service type from its parts, checking each.
    public init(
        name: String, transport: Transport = .tcp, subtype: String? = nil,
        domain: DomainName = ServiceType.localDomain
    ) throws(ServiceNameError) {
        try ServiceType.checkServiceName(name, input: "_\(name).\(transport.rawValue)")
        if let subtype {
            let count = subtype.utf8.count
            guard (1...63).contains(count) else {
                throw ServiceNameError(
                    input: subtype,
                    reason: count == 0 ? "it is empty; a subtype has 1 to 63 bytes" : "it is \(count) bytes; a subtype has at most 63",
                    subject: "subtype")
            }
        }
        self.name = name
        self.transport = transport
        self.subtype = subtype
        self.domain = domain
    }

    /// Parses `_name._tcp`, `_name._udp`, optionally with a subtype in front
    /// (`_sub1._sub._name._tcp`) and a domain after (`_name._tcp.local.`).
    public init(parsing text: String) throws(ServiceNameError) {
        let name: DomainName
        do {
            name = try DomainName(parsing: text)
        } catch {
            throw ServiceNameError(input: text, reason: error.reason)
        }
        try self.init(name: name, input: text)
    }

    public init?(_ description: String) {
        guard let type = try? ServiceType(parsing: description) else { return nil }
        self = type
    }

    /// Interprets a domain name such as `_openagents._tcp.local.` as a service type.
    public init(domainName: DomainName) throws(ServiceNameError) {
        try self.init(name: domainName, input: domainName.description)
    }

    private init(name fullName: DomainName, input: String) throws(ServiceNameError) {
        let labels = fullName.labels
        guard let transportIndex = labels.firstIndex(where: {
            Transport(rawValue: String(decoding: $0, as: UTF8.self).lowercased()) != nil
        }) else {
            throw ServiceNameError(
                input: input,
                reason: "a service type ends in \"._tcp\" or \"._udp\", as in \"_openagents._tcp\"")
        }
        let transportText = String(decoding: labels[transportIndex], as: UTF8.self).lowercased()
        guard let transport = Transport(rawValue: transportText) else {
            throw ServiceNameError(input: input, reason: "unknown transport")
        }
        let before = labels[..<transportIndex]
        var subtype: String? = nil
        switch before.count {
        case 1:
            break
        case 3:
            guard String(decoding: before[before.startIndex + 1], as: UTF8.self).lowercased() == "_sub"
            else {
                throw ServiceNameError(
                    input: input,
                    reason: "a subtype is written \"_subtype._sub._service._tcp\"; "
                        + "the second label must be \"_sub\"")
            }
            subtype = String(decoding: before[before.startIndex], as: UTF8.self)
        case 0:
            throw ServiceNameError(
                input: input, reason: "the service name is missing before the transport")
        default:
            throw ServiceNameError(
                input: input,
                reason: "expected \"_service._tcp\" or \"_subtype._sub._service._tcp\", "
                    + "found \(before.count) labels before the transport")
        }
        let serviceLabel = String(decoding: before[before.endIndex - 1], as: UTF8.self)
        guard serviceLabel.hasPrefix("_") else {
            // The input as it should have been written: the service label with its underscore.
            let corrected =
                input.hasPrefix(serviceLabel) ? "_" + input
                : input.replacing("._sub.\(serviceLabel).", with: "._sub._\(serviceLabel).")
            throw ServiceNameError(
                input: input,
                reason: "the service name must begin with an underscore, as in \(corrected.quotedPrefix(limit: 60))")
        }
        let domainLabels = labels[(transportIndex + 1)...]
        let domain: DomainName
        if domainLabels.isEmpty {
            domain = Self.localDomain
        } else {
            do {
                domain = try DomainName(labels: Array(domainLabels))
            } catch {
                throw ServiceNameError(input: input, reason: error.reason)
            }
        }
        try self.init(
            name: String(serviceLabel.dropFirst()), transport: transport, subtype: subtype,
            domain: domain)
    }

    /// Checks the RFC 6335 §5.1 rules for a service name (without the underscore).
    static func checkServiceName(_ name: String, input: String) throws(ServiceNameError) {
        let characters = Array(name.utf8)
        guard !characters.isEmpty else {
            throw ServiceNameError(
                input: input, reason: "the service name is empty; it needs 1 to 15 characters")
        }
        guard characters.count <= 15 else {
            throw ServiceNameError(
                input: input,
                reason: "the service name has \(characters.count) characters; "
                    + "at most 15 are allowed (RFC 6335)")
        }
        for byte in characters {
            let isLetter = (byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x7A
            let isDigit = byte >= 0x30 && byte <= 0x39
            guard isLetter || isDigit || byte == UInt8(ascii: "-") else {
                throw ServiceNameError(
                    input: input,
                    reason: "the service name may contain only letters, digits and hyphens; "
                        + "found \"\(String(decoding: [byte], as: UTF8.self))\"")
            }
        }
        guard characters.contains(where: { ($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7A }) else {
            throw ServiceNameError(
                input: input, reason: "the service name must contain at least one letter")
        }
        guard characters.first != UInt8(ascii: "-"), characters.last != UInt8(ascii: "-") else {
            throw ServiceNameError(
                input: input, reason: "the service name may not begin or end with a hyphen")
        }
        guard !name.contains("--") else {
            throw ServiceNameError(
                input: input, reason: "the service name may not contain two hyphens in a row")
        }
    }

    /// The same type without its subtype.
    public var baseType: ServiceType {
        (try? ServiceType(name: name, transport: transport, subtype: nil, domain: domain)) ?? self
    }

    /// The same type (and subtype) in another domain: `_openagents._tcp` in `lab.example.test.`.
    public func inDomain(_ domain: DomainName) -> ServiceType {
        (try? ServiceType(name: name, transport: transport, subtype: subtype, domain: domain)) ?? self
    }

    /// The same type narrowed to `subtype`.
    public func withSubtype(_ subtype: String) throws(ServiceNameError) -> ServiceType {
        try ServiceType(name: name, transport: transport, subtype: subtype, domain: domain)
    }

    /// The name browsed for: `_openagents._tcp.local.`, or `_sub1._sub._openagents._tcp.local.`.
    public var domainName: DomainName {
        var labels: [[UInt8]] = []
        if let subtype { labels += [Array(subtype.utf8), Array("_sub".utf8)] }
        labels += [Array("_\(name)".utf8), Array(transport.rawValue.utf8)]
        labels += domain.labels
        // Every part was checked at construction, so this cannot fail; fall back to the root.
        return (try? DomainName(labels: labels)) ?? .root
    }

    /// The type as people write it, without the domain: `_openagents._tcp`,
    /// `_printer._sub._http._tcp`.
    public var description: String {
        let base = "_\(name).\(transport.rawValue)"
        guard let subtype else { return base }
        return "\(DomainName.escape(label: Array(subtype.utf8)))._sub.\(base)"
    }

    /// The service-type enumeration name `_services._dns-sd._udp.<domain>` (RFC 6763 §9).
    public static func enumerationName(in domain: DomainName = localDomain) -> DomainName {
        (try? DomainName(labels: ["_services", "_dns-sd", "_udp"]).appending(domain)) ?? .root
    }
}

/// A service instance: a user-visible name (any UTF-8 but control characters, 1–63 bytes)
/// of a service type, e.g. `Build Box` of `_openagents._tcp` in `local.`. RFC 6763 §4.1.1.
public struct ServiceInstanceName: Hashable, Sendable, CustomStringConvertible {
    /// The instance name as people read it.
    public let instance: String
    public let type: ServiceType

    public init(_ instance: String, type: ServiceType) throws(ServiceNameError) {
        let count = instance.utf8.count
        guard (1...63).contains(count) else {
            throw ServiceNameError(
                input: instance,
                reason: count == 0
                    ? "it is empty; an instance name has 1 to 63 bytes of UTF-8"
                    : "it is \(count) bytes of UTF-8; an instance name has at most 63",
                subject: "instance name")
        }
        if let control = instance.unicodeScalars.first(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw ServiceNameError(
                input: instance,
                reason: "it contains a control character (U+\(String(control.value, radix: 16, uppercase: true))); "
                    + "any other UTF-8 is allowed", subject: "instance name")
        }
        self.instance = instance
        self.type = type.baseType
    }

    /// Splits a full name such as `Build\032Box._openagents._tcp.local.` into instance and type.
    public init(domainName: DomainName) throws(ServiceNameError) {
        guard let first = domainName.firstLabel else {
            throw ServiceNameError(input: ".", reason: "it is the root name, which names no service", subject: "instance name")
        }
        guard let text = String(validating: first, as: UTF8.self) else {
            throw ServiceNameError(
                input: domainName.description, reason: "its first label is not valid UTF-8", subject: "instance name")
        }
        try self.init(text, type: ServiceType(domainName: domainName.parent))
    }

    /// The full DNS name: instance label + service type + domain.
    public var domainName: DomainName {
        (try? type.domainName.prepending(Array(instance.utf8))) ?? .root
    }

    /// `Build Box._openagents._tcp.local.` with the instance unescaped, for people.
    public var description: String { "\(instance).\(type).\(type.domain)" }
}
