// What the Service Registration Protocol (RFC 9665) adds to the codec: the KEY record that
// carries a requestor's public key (RFC 2535 §3, restricted by RFC 3445), the SIG(0) record
// that signs a whole DNS UPDATE with it (RFC 2931), and the EDNS(0) Update Lease option
// (RFC 9664). Only the bytes: which bytes a signature covers, and the key tag. The signature
// itself (ECDSA P-256, RFC 6605) is computed by the caller, so the codec stays free of
// cryptography, as it does for TSIG.

extension RecordType {
    /// SIG (RFC 2535, RFC 2931): in SRP, the SIG(0) that signs a whole message.
    public static let sig = RecordType(24)
    /// KEY (RFC 2535, RFC 3445): in SRP, the public key that holds a name.
    public static let key = RecordType(25)
}

/// The DNSSEC algorithm numbers SRP uses (RFC 8624's registry).
public struct DNSSECAlgorithm: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    /// ECDSA on curve P-256 with SHA-256 (RFC 6605): the one algorithm RFC 9665 requires.
    public static let ecdsaP256SHA256 = DNSSECAlgorithm(13)

    public var description: String { self == .ecdsaP256SHA256 ? "ECDSAP256SHA256" : "ALG\(rawValue)" }
}

/// KEY record data (RFC 2535 §3.1; RFC 3445 leaves protocol 3, DNSSEC, as the only one).
///
/// For ECDSA P-256 the public key is the point's x and y, 32 bytes each, with no prefix
/// (RFC 6605 §4).
public struct KEYData: Hashable, Sendable {
    public var flags: UInt16
    /// Always 3 (DNSSEC) since RFC 3445.
    public var `protocol`: UInt8
    public var algorithm: DNSSECAlgorithm
    public var publicKey: [UInt8]

    /// The protocol value RFC 3445 §3 leaves: 3.
    public static let dnssecProtocol: UInt8 = 3
    /// The length of an ECDSA P-256 public key: x ‖ y (RFC 6605 §4).
    public static let p256PublicKeyLength = 64

    public init(flags: UInt16 = 0, protocol: UInt8 = KEYData.dnssecProtocol, algorithm: DNSSECAlgorithm, publicKey: [UInt8]) {
        self.flags = flags
        self.protocol = `protocol`
        self.algorithm = algorithm
        self.publicKey = publicKey
    }

    /// A P-256 key as SRP requestors send it: flags 0 (a key that may sign; RFC 2535 §3.1.2's
    /// "no key" bits clear), protocol 3, algorithm 13.
    public static func p256(_ publicKey: [UInt8]) -> KEYData {
        KEYData(algorithm: .ecdsaP256SHA256, publicKey: publicKey)
    }

    /// Reads KEY RDATA; nil when it is shorter than its four fixed bytes.
    public init?(rdata: [UInt8]) {
        guard rdata.count >= 4 else { return nil }
        self.init(
            flags: UInt16(rdata[0]) << 8 | UInt16(rdata[1]), protocol: rdata[2], algorithm: DNSSECAlgorithm(rdata[3]),
            publicKey: Array(rdata[4...]))
    }

    /// The RDATA: flags, protocol, algorithm, public key.
    public var rdata: [UInt8] {
        [UInt8(flags >> 8), UInt8(truncatingIfNeeded: flags), `protocol`, algorithm.rawValue] + publicKey
    }

    /// The record data for a message (KEY travels as RDATA the codec keeps byte for byte).
    public var recordData: RecordData { .unknown(.key, rdata) }

    /// True for what SRP accepts: protocol 3, ECDSA P-256, a 64-byte key.
    public var isP256: Bool {
        `protocol` == Self.dnssecProtocol && algorithm == .ecdsaP256SHA256 && publicKey.count == Self.p256PublicKeyLength
    }

    /// The key tag (RFC 4034 appendix B): the 16-bit checksum of the RDATA that a SIG names
    /// its key by. Not unique: it only saves trying keys that cannot match.
    public var keyTag: UInt16 { Self.keyTag(rdata: rdata) }

    /// RFC 4034 appendix B over any RDATA: even bytes count high, odd bytes low, carries folded
    /// back in once.
    public static func keyTag(rdata: [UInt8]) -> UInt16 {
        var sum: UInt32 = 0
        for (index, byte) in rdata.enumerated() {
            sum &+= index & 1 == 0 ? UInt32(byte) << 8 : UInt32(byte)
        }
        sum &+= (sum >> 16) & 0xFFFF
        return UInt16(truncatingIfNeeded: sum)
    }
}

extension RecordData {
    /// The KEY this data holds, if it is KEY data that reads.
    public var keyData: KEYData? {
        guard case .unknown(.key, let rdata) = self else { return nil }
        return KEYData(rdata: rdata)
    }
}

/// SIG record data (RFC 2535 §4.1), in the SIG(0) form of RFC 2931: a signature over a whole
/// message, type covered 0, labels 0, original TTL 0.
public struct SIGData: Hashable, Sendable {
    public var typeCovered: RecordType
    public var algorithm: DNSSECAlgorithm
    public var labels: UInt8
    public var originalTTL: UInt32
    /// Seconds since 1970 (mod 2^32, RFC 4034 §3.1.5) after which the signature is void.
    public var expiration: UInt32
    /// Seconds since 1970 (mod 2^32) before which the signature is void.
    public var inception: UInt32
    /// The signing KEY's ``KEYData/keyTag``.
    public var keyTag: UInt16
    /// Who signed; in SRP, the host name whose KEY signed.
    public var signerName: DomainName
    /// For ECDSA P-256, r ‖ s, 32 bytes each (RFC 6605 §4).
    public var signature: [UInt8]

    /// The length of an ECDSA P-256 signature: r ‖ s.
    public static let p256SignatureLength = 64

    public init(
        algorithm: DNSSECAlgorithm = .ecdsaP256SHA256, expiration: UInt32, inception: UInt32, keyTag: UInt16,
        signerName: DomainName, signature: [UInt8] = [], typeCovered: RecordType = RecordType(0), labels: UInt8 = 0,
        originalTTL: UInt32 = 0
    ) {
        self.typeCovered = typeCovered
        self.algorithm = algorithm
        self.labels = labels
        self.originalTTL = originalTTL
        self.expiration = expiration
        self.inception = inception
        self.keyTag = keyTag
        self.signerName = signerName
        self.signature = signature
    }

    /// True for the SIG(0) form (RFC 2931 §3): type covered 0, labels 0, original TTL 0.
    public var isSIG0: Bool { typeCovered.rawValue == 0 && labels == 0 && originalTTL == 0 }

    /// The RDATA without the signature, signer's name in canonical form (uncompressed, lower
    /// case: RFC 2535 §4.1.8 and §8.1): what RFC 2931 §3.1 puts first in the signed bytes.
    public var unsignedRDATA: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(18 + signerName.wireLength)
        appendUInt16(typeCovered.rawValue, to: &bytes)
        bytes.append(algorithm.rawValue)
        bytes.append(labels)
        appendUInt32(originalTTL, to: &bytes)
        appendUInt32(expiration, to: &bytes)
        appendUInt32(inception, to: &bytes)
        appendUInt16(keyTag, to: &bytes)
        return bytes + signerName.canonicalWire
    }

    /// The RDATA as sent: signer's name uncompressed (RFC 2931 §3 forbids compressing it), then
    /// the signature.
    public var rdata: [UInt8] { unsignedRDATA + signature }

    /// Reads SIG RDATA whose signer's name is written in full; nil when it is malformed.
    public init?(rdata: [UInt8]) {
        guard rdata.count >= 19, let (signer, end) = DomainName.readUncompressed(rdata, at: 18) else { return nil }
        self.init(rdata: rdata, signerName: signer, signatureStart: end)
    }

    /// The fixed fields from `rdata`, whose caller has read the signer's name and checked
    /// that 18 bytes come first.
    init(rdata: [UInt8], signerName: DomainName, signatureStart: Int) {
        func u16(_ at: Int) -> UInt16 { UInt16(rdata[at]) << 8 | UInt16(rdata[at + 1]) }
        func u32(_ at: Int) -> UInt32 { UInt32(u16(at)) << 16 | UInt32(u16(at + 2)) }
        self.init(
            algorithm: DNSSECAlgorithm(rdata[2]), expiration: u32(8), inception: u32(12), keyTag: u16(16),
            signerName: signerName, signature: Array(rdata[signatureStart...]), typeCovered: RecordType(u16(0)),
            labels: rdata[3], originalTTL: u32(4))
    }

    /// The bytes a SIG(0) signs (RFC 2931 §3.1): this RDATA without the signature, then the
    /// message as it was before the SIG was appended (its additional count one less).
    public func signedBytes(unsignedMessage: [UInt8]) -> [UInt8] {
        unsignedRDATA + unsignedMessage
    }

    /// Appends this SIG(0) record to an encoded message, whose additional count goes up by
    /// one: owner the root, class ANY, TTL 0 (RFC 2931 §3).
    public func appended(to message: [UInt8]) -> [UInt8] {
        guard var bytes = TSIGRecord.countingOneMoreAdditional(message) else { return message }
        bytes.append(0)  // the root name
        appendUInt16(RecordType.sig.rawValue, to: &bytes)
        appendUInt16(RecordClass.any.rawValue, to: &bytes)
        appendUInt32(0, to: &bytes)
        let data = rdata
        appendUInt16(UInt16(truncatingIfNeeded: data.count), to: &bytes)
        return bytes + data
    }

    /// Splits a received message into the part its SIG(0) signs (its additional count one
    /// less) and the SIG record, which must be the last record (RFC 2931 §3.1). Nil when the
    /// last record is not a SIG. A signer's name compressed against the message is read
    /// through its pointers (RFC 3597 §4 asks receivers to accept that).
    /// - Throws: ``DNSWireError`` when the message cannot be read, or its SIG is malformed.
    public static func split(_ message: [UInt8]) throws(DNSWireError) -> (unsigned: [UInt8], record: SIGData)? {
        let result = message.withUnsafeBytes { raw in
            Result { () throws(DNSWireError) -> (Int, SIGData)? in
                try WireReader.reading(raw) { (reader) throws(DNSWireError) -> (Int, SIGData)? in
                    guard let (start, _, rdata) = try reader.lastRecord(ofType: .sig) else { return nil }
                    // Where the RDATA sits in the packet (owner name, then 10 bytes of type,
                    // class, TTL and length): the signer's name may point back before it.
                    let (_, ownerEnd) = try reader.readName(at: start, limit: message.count)
                    let dataStart = ownerEnd + 10
                    guard rdata.count >= 19 else {
                        throw DNSWireError(.badRecordData, "a SIG record of \(rdata.count) bytes is too short", at: dataStart)
                    }
                    let (signer, end) = try reader.readName(at: dataStart + 18, limit: dataStart + rdata.count)
                    return (start, SIGData(rdata: rdata, signerName: signer, signatureStart: end - dataStart))
                }
            }
        }
        guard let (start, record) = try result.get() else { return nil }
        var unsigned = Array(message[..<start])
        let count = UInt16(unsigned[10]) << 8 | UInt16(unsigned[11])
        unsigned[10] = UInt8((count &- 1) >> 8)
        unsigned[11] = UInt8(truncatingIfNeeded: count &- 1)
        return (unsigned, record)
    }
}

/// The EDNS(0) Update Lease option (RFC 9664 §4): how long an update's records should live,
/// and, optionally, how long the KEY that holds their names should.
public struct UpdateLease: Hashable, Sendable {
    /// The option code (RFC 9664 §6).
    public static let optionCode: UInt16 = 2

    /// Seconds the records live (LEASE).
    public var lease: UInt32
    /// Seconds the KEY and the names it holds live (KEY-LEASE); nil in the 4-byte form.
    public var keyLease: UInt32?

    public init(lease: UInt32, keyLease: UInt32? = nil) {
        self.lease = lease
        self.keyLease = keyLease
    }

    /// The option as it goes into an OPT record's RDATA: code, length, data.
    public var option: [UInt8] {
        var bytes: [UInt8] = []
        appendUInt16(Self.optionCode, to: &bytes)
        appendUInt16(keyLease == nil ? 4 : 8, to: &bytes)
        appendUInt32(lease, to: &bytes)
        if let keyLease { appendUInt32(keyLease, to: &bytes) }
        return bytes
    }

    /// Finds the option among an OPT record's options. Nil when it is absent.
    /// - Throws: ``DNSWireError`` when the options do not parse or the lease option is neither 4
    ///   nor 8 bytes long.
    public init?(options: [UInt8]) throws(DNSWireError) {
        var index = 0
        while index < options.count {
            guard index + 4 <= options.count else {
                throw DNSWireError(.badRecordData, "an EDNS(0) option header is cut short", at: index)
            }
            let code = UInt16(options[index]) << 8 | UInt16(options[index + 1])
            let length = Int(options[index + 2]) << 8 | Int(options[index + 3])
            let start = index + 4
            guard start + length <= options.count else {
                throw DNSWireError(.badRecordData, "EDNS(0) option \(code) runs past the OPT record", at: index)
            }
            if code == Self.optionCode {
                func u32(_ at: Int) -> UInt32 {
                    UInt32(options[at]) << 24 | UInt32(options[at + 1]) << 16 | UInt32(options[at + 2]) << 8 | UInt32(options[at + 3])
                }
                switch length {
                case 4: self.init(lease: u32(start))
                case 8: self.init(lease: u32(start), keyLease: u32(start + 4))
                default:
                    throw DNSWireError(.badRecordData, "an Update Lease option of \(length) bytes; RFC 9664 allows 4 or 8", at: index)
                }
                return
            }
            index = start + length
        }
        return nil
    }

    /// An OPT record carrying this option, offering `payloadSize` bytes over UDP.
    public func optRecord(payloadSize: UInt16 = Message.ednsPayloadSize) -> ResourceRecord {
        ResourceRecord(name: .root, data: .opt(option), ttl: 0, class: RecordClass(payloadSize))
    }
}

extension Message {
    /// The Update Lease option of the message's OPT record; nil when there is none.
    /// - Throws: ``DNSWireError`` when the OPT record's options are malformed.
    public func updateLease() throws(DNSWireError) -> UpdateLease? {
        guard let opt = optRecord, case .opt(let options) = opt.data else { return nil }
        return try UpdateLease(options: options)
    }
}

private func appendUInt16(_ value: UInt16, to bytes: inout [UInt8]) {
    bytes.append(UInt8(value >> 8))
    bytes.append(UInt8(truncatingIfNeeded: value))
}

private func appendUInt32(_ value: UInt32, to bytes: inout [UInt8]) {
    appendUInt16(UInt16(truncatingIfNeeded: value >> 16), to: &bytes)
    appendUInt16(UInt16(truncatingIfNeeded: value), to: &bytes)
}
