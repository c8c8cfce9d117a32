// DNS Push subscriptions (RFC 8765) in the answering machine: what a subscriber is told and
// how long the link is asked for it, RECONFIRM turned into the link's names.
public import DNSWire

extension ProxyStateMachine {
    // MARK: DNS Push

    /// Pushed records keep their own TTLs, up to the largest a PUSH can carry (RFC 8765 §6.3.1:
    /// 0x7FFFFFFF; above it the field means removal): a host on the link that announces more
    /// must not make a PUSH unsendable.
    static let maximumPushTTL: UInt32 = 0x7FFF_FFFF

    /// A DNS Push session subscribes to `question` (its SUBSCRIBE's message ID is `id`). An
    /// accepted subscription keeps its link question alive, and every change to it comes as a
    /// ``Action/push(_:_:)`` until ``unsubscribe(session:id:now:)`` or
    /// ``sessionEnded(_:now:)``.
    public mutating func subscribe(_ question: Question, session: SessionID, id: UInt16, now: Duration) -> (SubscribeResult, [Action]) {
        guard question.class == .internet,
            let link = configuration.zones.firstIndex(where: { $0.contains(question.name) }).map(LinkIndex.init)
        else {
            statistics.subscriptionsRefused += 1
            return (.refused(.notAuthoritative), [])
        }
        if question.type.rawValue >= 128 || question.type == .opt || question.type == .tsig {
            statistics.subscriptionsRefused += 1
            return (.refused(.notImplemented), [])
        }
        let zone = configuration.zones[link.rawValue]
        // Names the zone itself holds: what it holds now, and never a change.
        if let held = zoneRecords(question, zone: zone) {
            statistics.subscriptions += 1
            return (.accepted(held.map(PushChange.add)), [])
        }
        guard let linkName = zone.linkName(for: question.name) else {
            statistics.subscriptions += 1
            return (.accepted([]), [])
        }
        let key = Key(link: link, question: LinkQuestion(name: linkName, type: question.type))
        let subscriber = Subscriber(session: session, id: id)
        var actions: [Action] = []
        if questions[key] == nil {
            guard linkBudget.take(now: now) else {
                statistics.linkQuestionsOverBudget += 1
                statistics.subscriptionsRefused += 1
                return (.refused(.serverFailure), [])
            }
            guard let made = makeRoom(now: now) else {
                statistics.subscriptionsRefused += 1
                return (.refused(.serverFailure), [])
            }
            actions += made
            questions[key] = QuestionState(started: now, lastAsked: now)
            unsettled.insert(key)
            statistics.linkQuestionsStarted += 1
            actions.append(.startLinkQuestion(link, key.question))
        }
        questions[key]?.subscribers.insert(subscriber)
        questions[key]?.lastAsked = now
        subscriptions[subscriber] = key
        statistics.subscriptions += 1
        let now = translate(records(for: key), translations[link.rawValue], cap: Self.maximumPushTTL).map(PushChange.add)
        return (.accepted(now), actions)
    }

    /// A DNS Push client's RECONFIRM of `record` (a record of a zone, RFC 8765 §6.5): the same
    /// record in the link's names, for the link to ask again; nothing for a record outside the
    /// zones, one of the zone's own (apex, name servers, browse domains), or one the link never
    /// told.
    public mutating func reconfirm(_ record: ResourceRecord) -> [Action] {
        guard let index = configuration.zones.firstIndex(where: { $0.contains(record.name) }) else { return [] }
        let zone = configuration.zones[index]
        guard zoneRecords(Question(name: record.name, type: record.type), zone: zone) == nil,
            let name = zone.linkName(for: record.name)
        else { return [] }
        func onLink(_ target: DomainName) -> DomainName { zone.linkName(for: target) ?? target }
        var data = record.data
        switch record.data {
        case .ptr(let target): data = .ptr(onLink(target))
        case .srv(var srv):
            srv.target = onLink(srv.target)
            data = .srv(srv)
        default: break
        }
        let link = LinkIndex(index)
        let linkRecord = ResourceRecord(name: name, data: data, ttl: 0)
        let question = LinkQuestion(name: name, type: record.type)
        guard let state = questions[Key(link: link, question: question)], state.records.values.contains(where: { $0.data == data }) else { return [] }
        statistics.reconfirms += 1
        return [.reconfirmOnLink(link, linkRecord)]
    }

    /// A subscription ended (UNSUBSCRIBE). Its link question is then kept only while others
    /// ask, and stops after the idle lifetime.
    public mutating func unsubscribe(session: SessionID, id: UInt16, now: Duration) {
        let subscriber = Subscriber(session: session, id: id)
        guard let key = subscriptions.removeValue(forKey: subscriber) else { return }
        questions[key]?.subscribers.remove(subscriber)
        questions[key]?.lastAsked = now
    }

    /// A session ended: all its subscriptions end.
    public mutating func sessionEnded(_ session: SessionID, now: Duration) {
        for subscriber in subscriptions.keys where subscriber.session == session {
            unsubscribe(session: session, id: subscriber.id, now: now)
        }
    }

    /// `_dns-push-tls._tcp.<zone>`'s records when the proxy offers DNS Push (RFC 8765 §6.1):
    /// an SRV naming the zone's first name server and the Push port; nil for other names, and
    /// when Push is not offered (the name is then administrative, with no records).
    func pushServiceRecords(_ question: Question, zone: ProxyZone) -> [ResourceRecord]? {
        guard let port = configuration.pushPort, let server = zone.nameServers.first,
            question.name == zone.pushServiceName
        else { return nil }
        guard question.type == .srv else { return [] }
        return [ResourceRecord(name: question.name, data: .srv(SRVData(priority: 0, weight: 0, port: port, target: server.name)), ttl: zone.oneShotTTL)]
    }

    /// `_dnssd-srp._udp.<zone>`'s records when an SRP registrar runs beside the proxy (RFC 9665
    /// §3.1): an SRV naming the zone's first name server and the registrar's port; nil for other
    /// names, and when there is none (the name is then the link's, where nobody answers it).
    func registrarServiceRecords(_ question: Question, zone: ProxyZone) -> [ResourceRecord]? {
        guard let port = configuration.registrarPort, let server = zone.nameServers.first,
            question.name == zone.registrarServiceName
        else { return nil }
        guard question.type == .srv || question.type == .any else { return [] }
        return [ResourceRecord(name: question.name, data: .srv(SRVData(priority: 0, weight: 0, port: port, target: server.name)), ttl: zone.oneShotTTL)]
    }

    /// The records the zone holds for a question about its own names (apex, name servers,
    /// browse domains, administrative names); nil for a name of the link.
    func zoneRecords(_ question: Question, zone: ProxyZone) -> [ResourceRecord]? {
        let name = question.name
        if name == zone.name {
            switch question.type {
            case .soa: return [zone.soaRecord]
            case .ns: return zone.nsRecords
            default: return []
            }
        }
        if zone.nameServers.contains(where: { $0.name == name }) {
            return zone.glueRecords.filter { $0.name == name && $0.type == question.type }
        }
        if let push = pushServiceRecords(question, zone: zone) { return push }
        if let registrar = registrarServiceRecords(question, zone: zone) { return registrar }
        if let label = Self.enumerationLabel(of: name, in: zone) {
            return question.type == .ptr && ["b", "db", "lb"].contains(label) ? [ResourceRecord(name: name, data: .ptr(zone.name), ttl: zone.oneShotTTL)] : []
        }
        if Self.isAdministrative(name, in: zone) || [RecordType.soa, .ns, Self.ds].contains(question.type) { return [] }
        return nil
    }
}
