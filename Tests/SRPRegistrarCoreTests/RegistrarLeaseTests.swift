import DNSWire
import SRPRegistrarCore
import Testing

@Suite("SRP registrar: first come, first served and leases (RFC 9665 §3.3.3, RFC 9664)")
struct RegistrarLeaseTests {
    @Test("a second key is refused a held host name or instance name with YXDOMAIN; nothing changes on the LAN")
    func secondKeyRefused() throws {
        let first = try Requestor(host: "box")
        let second = try Requestor(host: "box")
        var registrar = makeRegistrar()
        #expect(registrar.handle(try first.update(), from: source, now: .zero).rcode == .noError)
        let sameHost = registrar.handle(try second.update(services: []), from: source, now: .seconds(1))
        #expect(sameHost.rcode == .nameExists)
        #expect(sameHost.lan.isEmpty)
        // Another host name, but the first key's instance name.
        let third = try Requestor(host: "other")
        let sameInstance = registrar.handle(try third.update(), from: source, now: .seconds(2))
        #expect(sameInstance.rcode == .nameExists)
        #expect(registrar.statistics.nameHeld == 2)
        #expect(registrar.holder(of: first.hostName) == first.key)
        // A removal by another key is refused too: only the holder may remove.
        let removal = registrar.handle(try second.update(services: [], lease: UpdateLease(lease: 0, keyLease: 0)), from: source, now: .seconds(3))
        #expect(removal.rcode == .nameExists)
    }

    @Test("the same key updates: new address and port replace the old ones, an unchanged refresh tells the LAN nothing")
    func sameKeyUpdates() throws {
        var requestor = try Requestor()
        var registrar = makeRegistrar()
        _ = registrar.handle(try requestor.update(), from: source, now: .zero)
        let refresh = registrar.handle(try requestor.update(id: 2), from: source, now: .seconds(60))
        #expect(refresh.rcode == .noError)
        #expect(refresh.lan.isEmpty)
        #expect(registrar.nextDeadline == .seconds(60 + 7200))

        requestor.addresses = [.v4(IPv4Address(192, 0, 2, 99))]
        let moved = registrar.handle(
            try requestor.update(services: [Requestor.Service(instance: "Build Box", port: 9100)], id: 3), from: source, now: .seconds(120))
        #expect(moved.rcode == .noError)
        guard moved.lan.count == 2, case .publishHost(let host) = moved.lan[0], case .publishService(let service) = moved.lan[1] else {
            Issue.record("expected the host and the service published again: \(moved.lan)")
            return
        }
        #expect(host.addresses == [.v4(IPv4Address(192, 0, 2, 99))])
        #expect(service.srv.port == 9100)
    }

    @Test("removal: one service by its instructions, all by lease 0; goodbyes at once, the names still the key's")
    func removal() throws {
        let requestor = try Requestor()
        var registrar = makeRegistrar()
        let services = [Requestor.Service(instance: "One"), Requestor.Service(instance: "Two")]
        _ = registrar.handle(try requestor.update(services: services), from: source, now: .zero)

        let removeOne = registrar.handle(
            try requestor.update(services: [Requestor.Service(instance: "One", removing: true)], id: 2), from: source, now: .seconds(10))
        #expect(removeOne.rcode == .noError)
        #expect(removeOne.lan == [.withdrawService(requestor.instanceName(services[0]))])
        #expect(registrar.holder(of: requestor.instanceName(services[0])) == requestor.key)
        #expect(registrar.publishedHosts.first?.services.map(\.instance) == [requestor.instanceName(services[1])])

        let removeAll = registrar.handle(
            try requestor.update(services: [], lease: UpdateLease(lease: 0, keyLease: 3600), id: 3), from: source, now: .seconds(20))
        #expect(removeAll.rcode == .noError)
        #expect(removeAll.grantedLease == UpdateLease(lease: 0, keyLease: 3600))
        #expect(removeAll.lan == [.withdrawService(requestor.instanceName(services[1])), .withdrawHost(requestor.hostName)])
        #expect(registrar.publishedHosts.isEmpty)
        #expect(registrar.holder(of: requestor.hostName) == requestor.key)
        #expect(registrar.holder(of: requestor.instanceName(services[0])) == requestor.key)
        // Another key still cannot take them.
        let thief = try Requestor()
        #expect(registrar.handle(try thief.update(services: [services[1]]), from: source, now: .seconds(30)).rcode == .nameExists)
        // The key's lease runs out: free.
        #expect(registrar.nextDeadline == .seconds(20 + 3600))
        #expect(registrar.expire(now: .seconds(20 + 3600)).isEmpty)
        #expect(registrar.holder(of: requestor.hostName) == nil)
        #expect(registrar.handle(try thief.update(services: [services[1]]), from: source, now: .seconds(3700)).rcode == .noError)
    }

    @Test("lease 0 with key lease 0 releases the names at once")
    func removalWithRelease() throws {
        let requestor = try Requestor()
        var registrar = makeRegistrar()
        _ = registrar.handle(try requestor.update(), from: source, now: .zero)
        let actions = registrar.handle(try requestor.update(services: [], lease: UpdateLease(lease: 0, keyLease: 0)), from: source, now: .seconds(5))
        #expect(actions.rcode == .noError)
        #expect(actions.lan.count == 2)
        #expect(registrar.registrationCount == 0)
        #expect(registrar.holder(of: requestor.hostName) == nil)
        #expect(registrar.nextDeadline == nil)
        let other = try Requestor()
        #expect(registrar.handle(try other.update(), from: source, now: .seconds(6)).rcode == .noError)
    }

    @Test("lease expiry withdraws the records and keeps the key's claim; key lease expiry frees the name")
    func leaseExpiry() throws {
        let requestor = try Requestor()
        var registrar = makeRegistrar()
        _ = registrar.handle(try requestor.update(lease: UpdateLease(lease: 600, keyLease: 86400)), from: source, now: .zero)
        #expect(registrar.expire(now: .seconds(599)).isEmpty)
        #expect(registrar.nextDeadline == .seconds(600))
        let expired = registrar.expire(now: .seconds(600))
        #expect(expired == [.withdrawService(requestor.instanceName(Requestor.Service(instance: "Build Box"))), .withdrawHost(requestor.hostName)])
        #expect(registrar.statistics.leasesExpired == 1)
        #expect(registrar.holder(of: requestor.hostName) == requestor.key)
        #expect(registrar.nextDeadline == .seconds(86400))
        let thief = try Requestor()
        #expect(registrar.handle(try thief.update(), from: source, now: .hours(12)).rcode == .nameExists)
        // The owner comes back before its key lease ends: published again.
        let back = registrar.handle(try requestor.update(lease: UpdateLease(lease: 600, keyLease: 86400), id: 9), from: source, now: .hours(13))
        #expect(back.rcode == .noError)
        #expect(back.lan.count == 2)
        // Then goes quiet for good: records at +600 s, names at +1 day.
        _ = registrar.expire(now: .hours(13) + .seconds(600))
        #expect(registrar.holder(of: requestor.hostName) == requestor.key)
        #expect(registrar.expire(now: .hours(13) + .days(1)).isEmpty)
        #expect(registrar.statistics.keyLeasesExpired == 1)
        #expect(registrar.holder(of: requestor.hostName) == nil)
        #expect(registrar.handle(try thief.update(), from: source, now: .hours(38)).rcode == .noError)
    }

    @Test("leases are bounded: under 30 s raised, over 24 h lowered, key lease between the lease and 7 days, absent KEY-LEASE is the lease")
    func leaseBounds() throws {
        let requestor = try Requestor()
        func granted(_ asked: UpdateLease) throws -> UpdateLease? {
            var registrar = makeRegistrar()
            return registrar.handle(try requestor.update(lease: asked), from: source, now: .zero).grantedLease
        }
        #expect(try granted(UpdateLease(lease: 5, keyLease: 10)) == UpdateLease(lease: 30, keyLease: 30))
        #expect(try granted(UpdateLease(lease: 100_000, keyLease: 100)) == UpdateLease(lease: 86400, keyLease: 86400))
        #expect(try granted(UpdateLease(lease: 3600, keyLease: 30 * 86400)) == UpdateLease(lease: 3600, keyLease: 7 * 86400))
        #expect(try granted(UpdateLease(lease: 3600)) == UpdateLease(lease: 3600, keyLease: 3600))
        #expect(LeasePolicy().grant(UpdateLease(lease: 0, keyLease: 5)) == UpdateLease(lease: 0, keyLease: 30))
        #expect(LeasePolicy().grant(UpdateLease(lease: 0)) == UpdateLease(lease: 0, keyLease: 0))
    }
}
