import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from '../schemas/env';
import { resolveTemporalSettings } from './config';

const profileFile = (text: string) => {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'haru-temporal-')), 'temporal.toml');
  writeFileSync(file, text);
  return file;
};

describe('resolveTemporalSettings', () => {
  it("takes Haru's defaults when neither a variable nor a profile sets anything, plain text", () => {
    expect(resolveTemporalSettings({ TEMPORAL_ADDRESS: ' ' })).toEqual({
      address: 'localhost:7233',
      configured: false,
      namespace: 'default',
      connection: { address: 'localhost:7233' },
    });
  });

  it('lets a variable win over the profile, and reads the rest from the profile', () => {
    const file = profileFile('[profile.prod]\naddress = "a.example:7233"\nnamespace = "prod"\napi_key = "k"\n');
    const settings = resolveTemporalSettings({
      TEMPORAL_CONFIG_FILE: file,
      TEMPORAL_PROFILE: 'prod',
      TEMPORAL_ADDRESS: 'b.example:7233',
    });
    expect(settings).toMatchObject({ address: 'b.example:7233', configured: true, namespace: 'prod' });
    // An API key turns TLS on, as in every Temporal SDK.
    expect(settings.connection).toMatchObject({ address: 'b.example:7233', apiKey: 'k', tls: true });
  });

  it('names the setting for a missing file, an unknown profile and a certificate without its key', () => {
    expect(() => resolveTemporalSettings({ TEMPORAL_CONFIG_FILE: '/nope/temporal.toml' })).toThrow(
      /^TEMPORAL_CONFIG_FILE: no such file/,
    );
    const file = profileFile(
      '[profile.default]\naddress = "a:1"\n[profile.default.tls]\nclient_cert_path = "/nope.pem"\n',
    );
    expect(() => resolveTemporalSettings({ TEMPORAL_CONFIG_FILE: file, TEMPORAL_PROFILE: 'staging' })).toThrow(
      /^TEMPORAL_PROFILE=staging: Profile 'staging' not found/,
    );
    expect(() => resolveTemporalSettings({ TEMPORAL_CONFIG_FILE: file })).toThrow(
      /^tls\.client_cert_path of profile "default" in .*temporal\.toml: cannot read \/nope\.pem/,
    );
    expect(() => resolveTemporalSettings({ TEMPORAL_TLS_CLIENT_CERT_PATH: file })).toThrow(ConfigError);
    expect(() => resolveTemporalSettings({ TEMPORAL_TLS_CLIENT_CERT_PATH: file })).toThrow(
      /^TEMPORAL_TLS_CLIENT_CERT_PATH: a client certificate needs both/,
    );
  });
});
