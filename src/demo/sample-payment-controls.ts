/**
 * @module
 * A merchant's payment controls in the sample upstream: allow or deny rules of one type each, under
 * `/v1/acquirer/merchants/:merchant_id/payment_controls/:type`, scoped by the caller's acquirer.
 */
import type { SampleAuditLog } from './sample-audit-log.js';
import { invalid, jsonReply, refuse, type SampleRequest, type SampleRoute } from './sample-http.js';
import { newId } from './sample-ids.js';
import type { MerchantDirectory } from './sample-merchants.js';

/** The types the API documents; any other in the path is not a route (404). */
export const PAYMENT_CONTROL_TYPES = ['bin_range', 'bin_country', 'pan', 'fingerprint', 'ip', 'ip_country', 'eci', 'tds_status'] as const;

interface PaymentControl {
  readonly id: string;
  readonly acquirerId: string;
  readonly merchantId: string;
  readonly type: string;
  readonly activity: 'allow' | 'deny';
  readonly identifier: string;
  readonly createdAt: string;
}

function controlJson(c: PaymentControl) {
  return { id: c.id, merchant_id: c.merchantId, type: c.type, activity: c.activity, identifier: c.identifier, created_at: c.createdAt };
}

/** `{"activity": "allow"|"deny", "identifier": string}`, or a 422 naming what is wrong. */
function controlFields(body: unknown): Pick<PaymentControl, 'activity' | 'identifier'> {
  const fields = (typeof body === 'object' && body !== null && !Array.isArray(body) ? body : {}) as Record<string, unknown>;
  const errors: Record<string, string[]> = {};
  if (typeof body !== 'object' || body === null || Array.isArray(body)) errors.body = ['must be a JSON object'];
  if (fields.activity !== 'allow' && fields.activity !== 'deny') errors.activity = ['must be allow or deny'];
  if (typeof fields.identifier !== 'string' || fields.identifier.trim() === '') errors.identifier = ["can't be blank"];
  if (Object.keys(errors).length > 0) throw invalid(errors);
  return { activity: fields.activity as PaymentControl['activity'], identifier: (fields.identifier as string).trim() };
}

export function paymentControlRoutes(merchants: MerchantDirectory, audit: SampleAuditLog, now: () => Date): SampleRoute[] {
  const controls: PaymentControl[] = [];
  const types = PAYMENT_CONTROL_TYPES.join('|');
  /** The control named by the path, after the merchant's check: another acquirer's answers 403. */
  const find = (req: SampleRequest): PaymentControl => {
    const [merchantId, type, id] = req.params;
    merchants.assertOwn(req.acquirerId, merchantId!);
    const control = controls.find((c) => c.id === id);
    if (control && control.acquirerId !== req.acquirerId) throw refuse(403, 'forbidden');
    if (!control || control.merchantId !== merchantId || control.type !== type) throw refuse(404, 'payment control not found');
    return control;
  };
  const list = (req: SampleRequest) => {
    const [merchantId, type] = req.params;
    merchants.assertOwn(req.acquirerId, merchantId!);
    return jsonReply(200, controls.filter((c) => c.merchantId === merchantId && c.type === type).map(controlJson));
  };
  const create = (req: SampleRequest) => {
    const [merchantId, type] = req.params;
    merchants.assertOwn(req.acquirerId, merchantId!);
    const control: PaymentControl = { id: newId(), acquirerId: req.acquirerId, merchantId: merchantId!, type: type!, ...controlFields(req.body), createdAt: now().toISOString() };
    controls.push(control);
    audit.record(req.acquirerId, { actionType: 'create', subjectType: 'payment_control', subjectId: control.id }, new Date(control.createdAt));
    return jsonReply(201, controlJson(control), { location: `/v1/acquirer/merchants/${encodeURIComponent(control.merchantId)}/payment_controls/${type}/${control.id}` });
  };
  const remove = (req: SampleRequest) => {
    const control = find(req);
    controls.splice(controls.indexOf(control), 1);
    audit.record(req.acquirerId, { actionType: 'delete', subjectType: 'payment_control', subjectId: control.id }, now());
    return { status: 204 };
  };
  return [
    { pattern: new RegExp(`^/v1/acquirer/merchants/([^/]+)/payment_controls/(${types})$`), methods: { GET: list, POST: create } },
    { pattern: new RegExp(`^/v1/acquirer/merchants/([^/]+)/payment_controls/(${types})/([^/]+)$`), methods: { GET: (req) => jsonReply(200, controlJson(find(req))), DELETE: remove } },
  ];
}
