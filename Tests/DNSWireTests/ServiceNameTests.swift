import DNSWire
import Testing

@Suite("Service types and instance names")
struct ServiceNameTests {
    @Test("parse a service type with and without domain")
    func parse() throws {
        let type = try ServiceType(parsing: "_openagents._tcp")
        #expect(type.name == "openagents")
        #expect(type.transport == .tcp)
        #expect(type.subtype == nil)
        #expect(type.domain == "local.")
        #expect(type.description == "_openagents._tcp")
        #expect(type.domainName == "_openagents._tcp.local.")
        #expect(try ServiceType(parsing: "_openagents._tcp.local.") == type)
        #expect(try ServiceType(parsing: "_OpenAgents._TCP.local").transport == .tcp)
        let udp = try ServiceType(parsing: "_sleep-proxy._udp.example.com.")
        #expect(udp.transport == .udp)
        #expect(udp.domain == "example.com.")
    }

    @Test("the same type in another domain keeps its name, transport and subtype")
    func inDomain() throws {
        let type = try ServiceType(parsing: "_printer._sub._http._tcp")
        let moved = type.inDomain("lab.example.test.")
        #expect(moved.domain == "lab.example.test." && moved.subtype == "_printer" && moved.description == type.description)
        #expect(moved.domainName == "_printer._sub._http._tcp.lab.example.test.")
    }

    @Test("subtypes")
    func subtypes() throws {
        let type = try ServiceType(parsing: "_printer._sub._http._tcp")
        #expect(type.subtype == "_printer")
        #expect(type.name == "http")
        #expect(type.description == "_printer._sub._http._tcp")
        #expect(type.domainName == "_printer._sub._http._tcp.local.")
        #expect(type.baseType == (try ServiceType(parsing: "_http._tcp")))
        #expect(try type.baseType.withSubtype("_printer") == type)
    }

    @Test("service-type enumeration name")
    func enumeration() {
        #expect(ServiceType.enumerationName() == "_services._dns-sd._udp.local.")
    }

    @Test(
        "RFC 6335 rules, each refused with the rule it broke",
        arguments: [
            ("_._tcp", "empty"),
            ("_abcdefghijklmnop._tcp", "at most 15"),
            ("_a_b._tcp", "letters, digits and hyphens"),
            ("_1234._tcp", "at least one letter"),
            ("_-http._tcp", "begin or end with a hyphen"),
            ("_http-._tcp", "begin or end with a hyphen"),
            ("_ht--tp._tcp", "two hyphens in a row"),
            ("_http._sctp", "\"._tcp\" or \"._udp\""),
            ("http._tcp", "underscore"),
            ("_x._y._http._tcp", "\"_sub\""),
            ("_http..tcp", "empty label"),
        ])
    func rules(input: String, expected: String) {
        let error = #expect(throws: ServiceNameError.self) { try ServiceType(parsing: input) }
        #expect(error?.description.contains(expected) == true, "\(error?.description ?? "no error")")
    }

    @Test("15 characters is the limit, and digits with a letter are fine")
    func boundaries() throws {
        #expect(throws: Never.self) { try ServiceType(parsing: "_abcdefghijklmno._tcp") }
        #expect(throws: Never.self) { try ServiceType(parsing: "_x11._tcp") }
        #expect(throws: Never.self) { try ServiceType(parsing: "_a-b-c._udp") }
    }

    @Test("instance names: any UTF-8 up to 63 bytes, no control characters")
    func instances() throws {
        let type = try ServiceType(parsing: "_openagents._tcp")
        let name = try ServiceInstanceName("Build Box (2). Ünïcode", type: type)
        #expect(name.domainName.labels.first == Array("Build Box (2). Ünïcode".utf8))
        #expect(name.description == "Build Box (2). Ünïcode._openagents._tcp.local.")
        #expect(try ServiceInstanceName(domainName: name.domainName) == name)
        #expect(throws: Never.self) { try ServiceInstanceName(String(repeating: "x", count: 63), type: type) }
        #expect(throws: ServiceNameError.self) { try ServiceInstanceName(String(repeating: "x", count: 64), type: type) }
        // 21 three-byte characters are 63 bytes; one more is 66.
        #expect(throws: Never.self) { try ServiceInstanceName(String(repeating: "☕", count: 21), type: type) }
        #expect(throws: ServiceNameError.self) { try ServiceInstanceName(String(repeating: "☕", count: 22), type: type) }
        #expect(throws: ServiceNameError.self) { try ServiceInstanceName("", type: type) }
        let control = #expect(throws: ServiceNameError.self) { try ServiceInstanceName("tab\there", type: type) }
        #expect(control?.description.contains("U+9") == true)
    }

    @Test("an instance of a subtype belongs to the base type")
    func instanceOfSubtype() throws {
        let name = try ServiceInstanceName("P", type: ServiceType(parsing: "_printer._sub._http._tcp"))
        #expect(name.domainName == "P._http._tcp.local.")
    }

    @Test("error texts say each thing once: the input quoted once (its first 40 characters), what it is not, the rule")
    func errorTexts() throws {
        func refusal(_ make: () throws -> Void) -> String? {
            do { try make() } catch { return (error as? ServiceNameError)?.description ?? "not a ServiceNameError: \(error)" }
            return nil
        }
        #expect(
            refusal { _ = try ServiceType(parsing: "openagents._tcp") }
                == #""openagents._tcp" is not a service type: the service name must begin with an underscore, as in "_openagents._tcp""#)
        #expect(
            refusal { _ = try ServiceType(parsing: "_printer._sub.http._tcp") }
                == #""_printer._sub.http._tcp" is not a service type: the service name must begin with an underscore, as in "_printer._sub._http._tcp""#)
        #expect(
            refusal { _ = try ServiceType(parsing: "_abcdefghijklmnop._tcp") }
                == #""_abcdefghijklmnop._tcp" is not a service type: the service name has 16 characters; at most 15 are allowed (RFC 6335)"#)
        #expect(refusal { _ = try ServiceType(parsing: "_http..tcp") } == #""_http..tcp" is not a service type: empty label"#)
        let type = try ServiceType(parsing: "_openagents._tcp")
        #expect(refusal { _ = try ServiceInstanceName("", type: type) } == #""" is not an instance name: it is empty; an instance name has 1 to 63 bytes of UTF-8"#)
        let long = String(repeating: "x", count: 64)
        #expect(
            refusal { _ = try ServiceInstanceName(long, type: type) }
                == "\"\(String(repeating: "x", count: 40))…\" is not an instance name: it is 64 bytes of UTF-8; an instance name has at most 63")
        #expect(
            refusal { _ = try ServiceInstanceName("tab\there", type: type) }
                == "\"tab\there\" is not an instance name: it contains a control character (U+9); any other UTF-8 is allowed")
        #expect(
            refusal { _ = try type.withSubtype(String(repeating: "s", count: 64)) }
                == "\"\(String(repeating: "s", count: 40))…\" is not a subtype: it is 64 bytes; a subtype has at most 63")
        // A long input is quoted by its beginning, never whole.
        let huge = "_" + String(repeating: "a", count: 300) + "._tcp"
        let text = try #require(refusal { _ = try ServiceType(parsing: huge) })
        #expect(!text.contains(huge) && text.hasPrefix("\"_\(String(repeating: "a", count: 39))…\" is not a service type: "), "\(text)")
    }
}
