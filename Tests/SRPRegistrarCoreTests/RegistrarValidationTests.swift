import DNSWire
import SRPRegistrarCore
import Testing

@Suite("SRP registrar: validating updates (RFC 9665 §3.3)")
struct RegistrarValidationTests {
    @Test("a valid registration is accepted: NOERROR with the lease granted, host and service published")
    func validRegistration() throws {
        let requestor = try Requestor()
        var registrar = makeRegistrar()
        let actions = registrar.handle(try requestor.update(), from: source, now: .zero)
        #expect(actions.rcode == .noError)
        let reply = try #require(actions.reply)
        #expect(reply.header.isResponse && reply.header.id == 0x2024 && reply.header.opcode == Header.updateOpcode)
        #expect(reply.questions.first?.name == requestor.zone)
        #expect(actions.grantedLease == UpdateLease(lease: 7200, keyLease: 604_800))
        let lan = actions.lan
        #expect(lan.count == 2)
        guard case .publishHost(let host) = lan.first, case .publishService(let service) = lan.last else {
            Issue.record("expected the host, then the service: \(lan)")
            return
        }
        #expect(host.name == requestor.hostName)
        #expect(host.addresses == requestor.addresses)
        #expect(host.key == requestor.key)
        #expect(service.instance == DomainName("Build\\032Box._openagents._tcp.default.service.arpa."))
        #expect(service.serviceType == DomainName("_openagents._tcp.default.service.arpa."))
        #expect(service.srv.port == 9099 && service.srv.target == requestor.hostName)
        #expect(service.txt.strings == [Array("version=0.2.2".utf8)])
        #expect(registrar.statistics.accepted == 1)
        #expect(registrar.nextDeadline == .seconds(7200))
        #expect(try Message(decoding: reply.encoded()).updateLease() == UpdateLease(lease: 7200, keyLease: 604_800))
    }

    @Test("subtypes are listed with their instance; several services in one update")
    func subtypesAndSeveralServices() throws {
        let requestor = try Requestor()
        var registrar = makeRegistrar()
        let services = [
            Requestor.Service(instance: "One", subtypes: ["_printer"]), Requestor.Service(instance: "Two", type: "_http._tcp", port: 80),
        ]
        let actions = registrar.handle(try requestor.update(services: services), from: source, now: .zero)
        #expect(actions.rcode == .noError)
        let published = actions.lan.compactMap { action -> SRPService? in
            if case .publishService(let service) = action { return service }
            return nil
        }
        #expect(published.map(\.instance.description).sorted() == ["One._openagents._tcp.default.service.arpa.", "Two._http._tcp.default.service.arpa."])
        #expect(published.first { $0.srv.port == 9099 }?.subtypes == [DomainName("_printer._sub._openagents._tcp.default.service.arpa.")])
    }

    @Test("FORMERR: prerequisites, no host description, no lease, SRV elsewhere, a stray record, a PTR without a description")
    func formErrors() throws {
        let requestor = try Requestor()
        func rcode(_ message: Message) throws -> ResponseCode? {
            var registrar = makeRegistrar()
            return registrar.handle(try requestor.sign(message.encoded()), from: source, now: .zero).rcode
        }
        var withPrerequisite = requestor.message()
        withPrerequisite.answers = [ResourceRecord(name: requestor.hostName, data: .unknown(.any, []), ttl: 0, class: .none)]
        #expect(try rcode(withPrerequisite) == .formatError)
        #expect(try rcode(requestor.message(hostDescription: false)) == .formatError)
        #expect(try rcode(requestor.message(lease: nil)) == .formatError)

        var elsewhere = requestor.message()
        let srvIndex = try #require(elsewhere.authorities.firstIndex { $0.type == .srv })
        elsewhere.authorities[srvIndex].data = .srv(SRVData(port: 1, target: "other.default.service.arpa."))
        #expect(try rcode(elsewhere) == .formatError)

        var stray = requestor.message()
        stray.authorities.append(ResourceRecord(name: requestor.hostName, data: .txt(.empty), ttl: 60))
        #expect(try rcode(stray) == .formatError)

        var noDescription = requestor.message()
        noDescription.authorities.removeAll { $0.type == .srv || $0.type == .txt || ($0.class == .any && $0.name != requestor.hostName) }
        #expect(try rcode(noDescription) == .formatError)

        var twoKeys = requestor.message()
        let instance = requestor.instanceName(Requestor.Service(instance: "Build Box"))
        twoKeys.authorities.append(ResourceRecord(name: instance, data: KEYData.p256([UInt8](repeating: 9, count: 64)).recordData, ttl: 60))
        #expect(try rcode(twoKeys) == .formatError)

        var query = requestor.message()
        query.header.opcode = 0
        #expect(try rcode(query) == .notImplemented)

        var outside = requestor.message()
        outside.authorities.append(ResourceRecord(name: "x.example.", data: .a(IPv4Address(1, 2, 3, 4)), ttl: 60))
        #expect(try rcode(outside) == .notZone)

        // Garbage that has a header gets FORMERR; less than a header, or a response, nothing.
        var registrar = makeRegistrar()
        #expect(registrar.handle([0x12, 0x34, 0x28, 0, 0, 9, 0, 0, 0, 0, 0, 0], from: source, now: .zero).rcode == .formatError)
        #expect(registrar.handle([1, 2, 3], from: source, now: .zero).isEmpty)
        #expect(registrar.handle([0x12, 0x34, 0xA8, 0, 0, 0, 0, 0, 0, 0, 0, 0], from: source, now: .zero).isEmpty)
        #expect(registrar.statistics.dropped == 2 && registrar.statistics.malformed == 1)
    }

    @Test("REFUSED for a zone this registrar does not serve")
    func zoneNotServed() throws {
        var requestor = try Requestor()
        requestor.zone = "example.test."
        var registrar = makeRegistrar()
        let actions = registrar.handle(try requestor.update(), from: source, now: .zero)
        #expect(actions.rcode == .refused)
        #expect(actions.lan.isEmpty)
        #expect(registrar.statistics.zoneNotServed == 1)
    }

    @Test("NOTAUTH: unsigned, a byte flipped after signing, another key's signature, a wrong key tag; nothing reaches the LAN")
    func badSignatures() throws {
        let requestor = try Requestor()
        let other = try Requestor()
        var registrar = makeRegistrar()
        let unsigned = try requestor.message().encoded()
        var results: [[RegistrarAction]] = []
        results.append(registrar.handle(unsigned, from: source, now: .zero))

        let signed = try requestor.update()
        for index in [13, signed.count / 2, signed.count - 70, signed.count - 1] {
            var tampered = signed
            tampered[index] ^= 0x01
            let actions = registrar.handle(tampered, from: source, now: .zero)
            // A flipped byte may break the form first (FORMERR, or REFUSED for a zone name
            // changed); never is it accepted.
            #expect(actions.rcode != nil && actions.rcode != .noError, "byte \(index)")
            results.append(actions)
        }
        // The TXT's value changed, the form intact: only the signature can tell.
        let txtAt = try #require(findSubsequence(Array("version=0.2.2".utf8), in: signed))
        var changedTXT = signed
        changedTXT[txtAt + 8] = UInt8(ascii: "9")
        let changed = registrar.handle(changedTXT, from: source, now: .zero)
        #expect(changed.rcode == .notAuthoritative)
        results.append(changed)

        // Signed by another key than the KEY the update carries.
        var foreign = SIGData(expiration: 2, inception: 1, keyTag: requestor.key.keyTag, signerName: requestor.hostName)
        foreign.signature = try other.identity.signRaw(foreign.signedBytes(unsignedMessage: unsigned))
        results.append(registrar.handle(foreign.appended(to: unsigned), from: source, now: .zero))
        results.append(registrar.handle(try requestor.sign(unsigned, keyTag: requestor.key.keyTag &+ 1), from: source, now: .zero))

        for actions in results { #expect(actions.lan.isEmpty) }
        #expect(results.first?.rcode == .notAuthoritative)
        #expect(results.suffix(3).allSatisfy { $0.rcode == .notAuthoritative })
        #expect(registrar.statistics.badSignature >= 4)
        #expect(registrar.statistics.accepted == 0)
        #expect(registrar.registrationCount == 0)
    }

    @Test("NOTAUTH for a KEY that is not ECDSA P-256")
    func unsupportedKey() throws {
        let requestor = try Requestor()
        var registrar = makeRegistrar()
        let rsa = KEYData(algorithm: DNSSECAlgorithm(8), publicKey: [UInt8](repeating: 1, count: 64))
        let message = requestor.message(keyOnHost: rsa)
        #expect(registrar.handle(try requestor.sign(message.encoded()), from: source, now: .zero).rcode == .notAuthoritative)
    }

    @Test("hostile updates never trap and never reach the LAN: every byte of a signed update mutated")
    func hostileUpdates() throws {
        let requestor = try Requestor()
        var registrar = makeRegistrar(limits: RegistrarLimits(updateRate: UpdateRate(perSecond: 1e9, burst: 1e9)))
        let signed = try requestor.update()
        var accepted = 0
        for index in signed.indices {
            for value: UInt8 in [0x00, 0xFF, 0xC0, signed[index] ^ 0x80] where value != signed[index] {
                var mutated = signed
                mutated[index] = value
                let actions = registrar.handle(mutated, from: source, now: .zero)
                if actions.rcode == .noError { accepted += 1 }
            }
        }
        for length in 0..<signed.count {
            #expect(registrar.handle(Array(signed.prefix(length)), from: source, now: .zero).lan.isEmpty)
        }
        // SIG(0) signs the whole message, header included: no mutated update passes.
        #expect(accepted == 0)
        #expect(registrar.registrationCount == 0)
    }
}

func findSubsequence(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
    guard needle.count <= haystack.count else { return nil }
    for start in 0...(haystack.count - needle.count) where Array(haystack[start..<(start + needle.count)]) == needle {
        return start
    }
    return nil
}
