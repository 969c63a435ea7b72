/**
 * Issues X.509 server certificates from a CA with Node's own crypto: Node can parse certificates
 * (`X509Certificate`) and sign bytes but cannot build a certificate, and no X.509 library is a dependency of
 * Haru. The certificate is written in DER by hand (RFC 5280 §4.1): a fresh P-256 key, the CA's subject as
 * issuer, basicConstraints CA:FALSE, keyUsage digitalSignature, extKeyUsage serverAuth, the subject
 * alternative names given, the CA's subject key identifier as authority key identifier when it has one.
 */
import {
  createHash,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  sign,
  X509Certificate,
} from 'node:crypto';

// --- DER writing (X.690) ---

function derLength(length: number): Buffer {
  if (length < 0x80) return Buffer.from([length]);
  const bytes: number[] = [];
  for (let n = length; n > 0; n >>= 8) bytes.unshift(n & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

const tlv = (tag: number, ...content: Buffer[]): Buffer => {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), derLength(body.length), body]);
};
const sequence = (...items: Buffer[]) => tlv(0x30, ...items);
const set = (...items: Buffer[]) => tlv(0x31, ...items);
const explicit = (n: number, content: Buffer) => tlv(0xa0 + n, content);
const octetString = (content: Buffer) => tlv(0x04, content);
const bitString = (content: Buffer) => tlv(0x03, Buffer.from([0]), content);
const utf8String = (text: string) => tlv(0x0c, Buffer.from(text, 'utf8'));
const boolTrue = () => tlv(0x01, Buffer.from([0xff]));
const derNull = () => Buffer.from([0x05, 0x00]);

/** A non-negative INTEGER from big-endian bytes (a leading 0 when the high bit is set). */
function integer(bytes: Buffer): Buffer {
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start++;
  const trimmed = bytes.subarray(start);
  return tlv(0x02, trimmed[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), trimmed]) : trimmed);
}

function oid(dotted: string): Buffer {
  const [first, second, ...rest] = dotted.split('.').map(Number);
  const bytes = [first! * 40 + second!];
  for (const arc of rest) {
    const chunk = [arc & 0x7f];
    for (let n = arc >>> 7; n > 0; n >>>= 7) chunk.unshift((n & 0x7f) | 0x80);
    bytes.push(...chunk);
  }
  return tlv(0x06, Buffer.from(bytes));
}

/** UTCTime through 2049, GeneralizedTime after (RFC 5280 §4.1.2.5). */
function time(at: Date): Buffer {
  const iso = at
    .toISOString()
    .replace(/\.\d{3}/, '')
    .replace(/[-:T]/g, '');
  return at.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(iso.slice(2))) : tlv(0x18, Buffer.from(iso));
}

// --- DER reading: just enough to take the CA's subject and key identifier ---

interface Node {
  tag: number;
  /** The whole TLV. */
  raw: Buffer;
  content: Buffer;
}

function readNode(buf: Buffer, offset: number): Node & { end: number } {
  const tag = buf[offset]!;
  let length = buf[offset + 1]!;
  let header = 2;
  if (length & 0x80) {
    const count = length & 0x7f;
    length = 0;
    for (let i = 0; i < count; i++) length = length * 256 + buf[offset + 2 + i]!;
    header += count;
  }
  const end = offset + header + length;
  if (end > buf.length) throw new Error('truncated DER');
  return { tag, raw: buf.subarray(offset, end), content: buf.subarray(offset + header, end), end };
}

function children(node: Node): Node[] {
  const out: Node[] = [];
  for (let offset = 0; offset < node.content.length;) {
    const child = readNode(node.content, offset);
    out.push(child);
    offset = child.end;
  }
  return out;
}

const OID = {
  commonName: '2.5.4.3',
  subjectKeyIdentifier: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  authorityKeyIdentifier: '2.5.29.35',
  extKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  sha256WithRsa: '1.2.840.113549.1.1.11',
  ed25519: '1.3.101.112',
} as const;

/** The CA certificate's subject (the issued certificate's issuer, byte for byte) and its subject key id. */
function caFields(ca: X509Certificate): { subject: Buffer; keyId?: Buffer } {
  const tbs = children(readNode(ca.raw, 0))[0]!;
  const fields = children(tbs);
  const at = fields[0]!.tag === 0xa0 ? 1 : 0; // [0] version is absent in a v1 certificate
  const subject = fields[at + 4]!.raw;
  const extensions = fields.find((f) => f.tag === 0xa3);
  let keyId: Buffer | undefined;
  for (const ext of extensions ? children(children(extensions)[0]!) : []) {
    const parts = children(ext);
    if (!parts[0]!.raw.equals(oid(OID.subjectKeyIdentifier))) continue;
    keyId = readNode(parts.at(-1)!.content, 0).content; // OCTET STRING { OCTET STRING keyId }
  }
  return { subject, keyId };
}

/** The signature algorithm for the CA's key: SHA-256 with ECDSA or RSA (PKCS#1 v1.5), or Ed25519. */
function signatureAlgorithm(caKey: KeyObject): { id: Buffer; hash: string | null } {
  switch (caKey.asymmetricKeyType) {
    case 'ec':
      return { id: sequence(oid(OID.ecdsaWithSha256)), hash: 'sha256' };
    case 'rsa':
      return { id: sequence(oid(OID.sha256WithRsa), derNull()), hash: 'sha256' };
    case 'ed25519':
      return { id: sequence(oid(OID.ed25519)), hash: null };
    default:
      throw new Error(`a CA key of type ${caKey.asymmetricKeyType} cannot issue here: use an EC, RSA or Ed25519 key`);
  }
}

const extension = (id: string, critical: boolean, value: Buffer) =>
  sequence(oid(id), ...(critical ? [boolTrue()] : []), octetString(value));

const pem = (label: string, der: Buffer) =>
  `-----BEGIN ${label}-----\n${der.toString('base64').replace(/.{1,64}/g, '$&\n')}-----END ${label}-----\n`;

export interface IssueServerCertificateInput {
  ca: { cert: X509Certificate; key: KeyObject };
  /** The certificate's DNS name (its common name and subject alternative name). */
  dnsName: string;
  notBefore: Date;
  notAfter: Date;
}

export interface IssuedCertificate {
  certPem: string;
  /** The new private key, PKCS#8 PEM. */
  keyPem: string;
  /** Hex, as openssl prints it. */
  serial: string;
  notAfter: Date;
  /** SHA-256 of the DER, colon-separated hex (what `X509Certificate.fingerprint256` says). */
  fingerprint256: string;
}

/** A server certificate for `dnsName` from `ca`, with a fresh P-256 key. */
export function issueServerCertificate(input: IssueServerCertificateInput): IssuedCertificate {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const { subject: issuer, keyId: caKeyId } = caFields(input.ca.cert);
  const algorithm = signatureAlgorithm(input.ca.key);
  const serial = randomBytes(16);
  serial[0]! &= 0x7f;
  serial[0]! |= 0x01; // positive and never zero
  // RFC 5280 §4.2.1.2 method 1: SHA-1 of the subjectPublicKey bits.
  const keyBits = children(readNode(spki, 0))[1]!.content.subarray(1);
  const keyId = createHash('sha1').update(keyBits).digest();
  const extensions = [
    extension(OID.basicConstraints, true, sequence()),
    extension(OID.keyUsage, true, tlv(0x03, Buffer.from([7, 0x80]))), // digitalSignature
    extension(OID.extKeyUsage, false, sequence(oid(OID.serverAuth))),
    extension(OID.subjectAltName, false, sequence(tlv(0x82, Buffer.from(input.dnsName, 'ascii')))),
    extension(OID.subjectKeyIdentifier, false, octetString(keyId)),
    ...(caKeyId ? [extension(OID.authorityKeyIdentifier, false, sequence(tlv(0x80, caKeyId)))] : []),
  ];
  const tbs = sequence(
    explicit(0, integer(Buffer.from([2]))), // v3
    integer(serial),
    algorithm.id,
    issuer,
    sequence(time(input.notBefore), time(input.notAfter)),
    sequence(set(sequence(oid(OID.commonName), utf8String(input.dnsName)))),
    spki,
    explicit(3, sequence(...extensions)),
  );
  const signature = sign(algorithm.hash, tbs, input.ca.key);
  const der = sequence(tbs, algorithm.id, bitString(signature));
  const cert = new X509Certificate(der);
  return {
    certPem: pem('CERTIFICATE', der),
    keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    serial: cert.serialNumber,
    notAfter: new Date(cert.validTo),
    fingerprint256: cert.fingerprint256,
  };
}

/** Whether `key` is the private key of `cert`'s public key. */
export function keyMatchesCertificate(cert: X509Certificate, key: KeyObject): boolean {
  const fromKey = createPublicKey(key).export({ type: 'spki', format: 'der' });
  return fromKey.equals(cert.publicKey.export({ type: 'spki', format: 'der' }));
}
