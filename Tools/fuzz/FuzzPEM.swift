// libFuzzer target for PeerTrust's certificate input: DER (Certificate(der:)) and PEM
// (Certificate.chain(pem:), PEM.blocks, PEM.encode). Tools/fuzz/build compiles this file into
// the SAME module (PeerTrust) as Sources/PeerTrust/*.swift, so it may use internal API; the C
// shim Sources/CPeerTrust is compiled with clang -fsanitize=fuzzer-no-link,address, and OpenSSL
// itself is the system's (not instrumented: its parser gives no coverage feedback, and ASan
// sees only what it allocates through malloc).
//
// Every failed property calls `fail`, which traps with a message naming the property; libFuzzer
// then saves the input under .build-fuzz/crashes-pem/.
//
//  T1 The input as DER: Certificate(der:) never traps; it throws PeerTrustError.malformed or
//     returns a certificate whose `der` is exactly the input.
//  T2 A certificate that parses keeps its facts:
//     - they are a function of its bytes: OpenSSL.inspect(der) run afresh (no memo) gives the
//       facts the Certificate holds, and right after a read Certificate.remembered(der:) gives
//       an equal value;
//     - its PEM form (certificate.pem) reads back through Certificate.chain(pem:) as exactly
//       that one certificate;
//     - OpenSSL's own re-encoding of it (d2i_X509, i2d_X509) parses to the same facts, and
//       re-encoding that gives the same bytes again (a fixed point);
//     - it must be the whole buffer: its DER followed by one more byte does not parse;
//     - peerID is the SHA-256 of publicKeyInfo, a non-empty DER SEQUENCE.
//  T3 The input as PEM text (invalid UTF-8 replaced with U+FFFD): PEM.blocks(in:) and
//     Certificate.chain(pem:) never trap and throw only .malformed; a chain holds 1...32
//     certificates, one per CERTIFICATE / X509 CERTIFICATE / TRUSTED CERTIFICATE block in
//     order, each equal to Certificate(der:) of its block's bytes and keeping T2.
//  T4 The PEM codec round-trips any bytes: PEM.encode(input, label:) reads back through
//     PEM.blocks(in:) as one block with that label, no headers and exactly the input (for a
//     non-empty input; an empty one gives a block that is refused as not base64).
import NearbyBasics

import COpenSSL
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: count == 0 ? nil : start, count: count)
    FuzzPEM(bytes: Array(input)).run()
    return 0
}

/// The facts of OpenSSL.CertificateFacts, comparable.
struct FuzzFacts: Equatable, CustomStringConvertible {
    var notBefore: Int64
    var notAfter: Int64
    var isCA: Bool
    var isSelfSigned: Bool
    var subject: String
    var issuer: String
    var commonName: String
    var publicKeyInfo: [UInt8]

    init(_ facts: OpenSSL.CertificateFacts) {
        (notBefore, notAfter, isCA, isSelfSigned) = (facts.notBefore, facts.notAfter, facts.isCA, facts.isSelfSigned)
        (subject, issuer, commonName, publicKeyInfo) = (facts.subject, facts.issuer, facts.commonName, facts.publicKeyInfo)
    }

    init(_ certificate: Certificate) {
        notBefore = Int64(certificate.notBefore.timeIntervalSince1970)
        notAfter = Int64(certificate.notAfter.timeIntervalSince1970)
        (isCA, isSelfSigned) = (certificate.isCA, certificate.isSelfSigned)
        (subject, issuer, commonName) = (certificate.subject, certificate.issuer, certificate.commonName)
        publicKeyInfo = certificate.publicKeyInfo
    }

    var description: String {
        "subject \(subject) issuer \(issuer) CN \(commonName) \(notBefore)...\(notAfter) CA \(isCA) "
            + "self-signed \(isSelfSigned) SPKI \(publicKeyInfo.count) bytes"
    }
}

struct FuzzPEM {
    let bytes: [UInt8]

    func run() {
        if let certificate = readDER(bytes, "the input as DER") {  // T1
            checkCertificate(certificate, "the input as DER")    // T2
        }
        checkPEMText()  // T3
        checkCodec()    // T4
    }

    // MARK: T1

    func readDER(_ der: [UInt8], _ what: String) -> Certificate? {
        do {
            let certificate = try Certificate(der: der)
            guard certificate.der == der else { fail("T1", "\(what): the certificate's der is not the bytes it was read from") }
            // Nothing was read in between, so the memo cannot have been emptied since.
            guard Certificate.remembered(der: der) == certificate else {
                fail("T2", "\(what): Certificate.remembered(der:) does not give the certificate just read")
            }
            return certificate
        } catch {
            guard error.code == .malformed else { fail("T1", "\(what): threw \(error.code), not malformed: \(error)") }
            return nil
        }
    }

    // MARK: T2

    func checkCertificate(_ certificate: Certificate, _ what: String) {
        let facts = FuzzFacts(certificate)
        let fresh: OpenSSL.CertificateFacts
        do {
            fresh = try OpenSSL.inspect(certificate.der)
        } catch {
            fail("T2", "\(what): parsed once, but OpenSSL.inspect of the same bytes fails: \(error)")
        }
        guard FuzzFacts(fresh) == facts else {
            fail("T2", "\(what): facts differ between two reads:\n\(facts)\n\(FuzzFacts(fresh))")
        }

        let pem = certificate.pem
        do {
            let chain = try Certificate.chain(pem: pem)
            guard chain == [certificate] else {
                fail("T2", "\(what): its PEM reads back as \(chain.count) certificates, not itself\n\(pem)")
            }
        } catch {
            fail("T2", "\(what): its PEM does not read back: \(error)\n\(pem)")
        }

        guard let reencoded = opensslReencoded(certificate.der) else {
            fail("T2", "\(what): PeerTrust accepts it but d2i_X509/i2d_X509 cannot re-encode it")
        }
        let again: OpenSSL.CertificateFacts
        do {
            again = try OpenSSL.inspect(reencoded)
        } catch {
            fail("T2", "\(what): OpenSSL's re-encoding does not parse: \(error)\nre-encoded: \(hexString(reencoded))")
        }
        guard FuzzFacts(again) == facts else {
            fail("T2", "\(what): OpenSSL's re-encoding has other facts:\n\(facts)\n\(FuzzFacts(again))\nre-encoded: \(hexString(reencoded))")
        }
        guard opensslReencoded(reencoded) == reencoded else {
            fail("T2", "\(what): re-encoding is not a fixed point\nre-encoded: \(hexString(reencoded))")
        }

        if (try? Certificate(der: certificate.der + [0])) != nil {
            fail("T2", "\(what): its DER followed by a zero byte still parses as one certificate")
        }

        guard certificate.publicKeyInfo.first == 0x30 else {
            fail("T2", "\(what): publicKeyInfo is not a DER SEQUENCE: \(hexString(certificate.publicKeyInfo))")
        }
        guard certificate.peerID.bytes == OpenSSL.sha256(certificate.publicKeyInfo), certificate.peerID.bytes.count == 32 else {
            fail("T2", "\(what): peerID is not the SHA-256 of publicKeyInfo")
        }
        _ = certificate.description
        _ = certificate.peerID.description
    }

    /// d2i_X509 then i2d_X509: OpenSSL's own DER for what it read; nil if it cannot.
    func opensslReencoded(_ der: [UInt8]) -> [UInt8]? {
        der.withUnsafeBufferPointer { buffer -> [UInt8]? in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            guard let x509 = d2i_X509(nil, &cursor, buffer.count) else { return nil }
            defer { X509_free(x509) }
            let length = i2d_X509(x509, nil)
            guard length > 0 else { return nil }
            var out = [UInt8](repeating: 0, count: Int(length))
            let written = out.withUnsafeMutableBufferPointer { target -> Int32 in
                var next: UnsafeMutablePointer<UInt8>? = target.baseAddress
                return i2d_X509(x509, &next)
            }
            ERR_clear_error()
            return written == length ? out : nil
        }
    }

    // MARK: T3

    func checkPEMText() {
        let text = String(decoding: bytes, as: UTF8.self)
        let blocks: [PEM.Block]
        do {
            blocks = try PEM.blocks(in: text)
        } catch {
            guard error.code == .malformed else { fail("T3", "PEM.blocks threw \(error.code), not malformed: \(error)") }
            if (try? Certificate.chain(pem: text)) != nil {
                fail("T3", "PEM.blocks refuses the text but Certificate.chain(pem:) reads it")
            }
            return
        }
        for block in blocks where block.bytes.isEmpty {
            fail("T3", "PEM.blocks returned an empty \(block.label) block")
        }
        let certificateBlocks = blocks.filter {
            $0.label == "CERTIFICATE" || $0.label == "X509 CERTIFICATE" || $0.label == "TRUSTED CERTIFICATE"
        }
        let chain: [Certificate]
        do {
            chain = try Certificate.chain(pem: text)
        } catch {
            guard error.code == .malformed else { fail("T3", "Certificate.chain(pem:) threw \(error.code), not malformed: \(error)") }
            return
        }
        guard (1...Certificate.maximumChainLength).contains(chain.count), chain.count == certificateBlocks.count else {
            fail("T3", "a chain of \(chain.count) certificates from \(certificateBlocks.count) certificate blocks")
        }
        for (index, (certificate, block)) in zip(chain, certificateBlocks).enumerated() {
            guard certificate.der == block.bytes, readDER(block.bytes, "PEM block \(index)") == certificate else {
                fail("T3", "certificate \(index) of the chain is not Certificate(der:) of its block")
            }
            checkCertificate(certificate, "certificate \(index) of the PEM chain")
        }
    }

    // MARK: T4

    func checkCodec() {
        // A label from the input (printable ASCII, no dashes), or CERTIFICATE.
        let picked = bytes.prefix(12).filter { (0x41...0x5A).contains($0) || $0 == 0x20 }
        let label = picked.count >= 3 && picked.first != 0x20 && picked.last != 0x20
            ? String(decoding: picked, as: UTF8.self) : "CERTIFICATE"
        let pem = PEM.encode(bytes, label: label)
        do {
            let blocks = try PEM.blocks(in: pem)
            guard !bytes.isEmpty else { fail("T4", "an empty block was accepted: \(blocks.count) blocks") }
            guard blocks.count == 1, blocks[0].label == label, blocks[0].headers.isEmpty, blocks[0].bytes == bytes else {
                fail("T4", "PEM.encode(input, label: \"\(label)\") read back as \(blocks.map { ($0.label, $0.bytes.count, $0.headers) })\n\(pem)")
            }
        } catch {
            guard bytes.isEmpty else { fail("T4", "PEM.encode(input, label: \"\(label)\") does not read back: \(error)\n\(pem)") }
        }
    }

    // MARK: reporting

    func fail(_ property: String, _ detail: String) -> Never {
        fuzzFailure("PEM", property, detail, input: bytes)
    }
}
